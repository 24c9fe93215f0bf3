"""One HTTP status for each library error, shared by the REST API and the dashboard."""

from __future__ import annotations

import pytest

from engramdb import errors
from engramdb.interfaces._status import status_of

EXPECTED = {
    "EngramError": 500,
    "ValidationError": 422,
    "ConfigError": 422,
    "NotFound": 404,
    "AccessDenied": 403,
    "NotAuthenticated": 401,
    "StorageError": 503,
    "NotAStoreError": 503,
    "CorruptStoreError": 503,
    "SchemaVersionError": 503,
    "EmbeddingError": 500,
    "ModelIntegrityError": 500,
    "ModelMismatchError": 500,
    "LLMError": 502,
    "LLMNotConfigured": 501,
}


def test_every_public_error_has_its_status_listed() -> None:
    assert set(EXPECTED) == set(errors.__all__)


@pytest.mark.parametrize(("name", "status"), sorted(EXPECTED.items()))
def test_each_error_gets_its_status(name: str, status: int) -> None:
    cls = getattr(errors, name)
    assert status_of(cls("why")) == status


def test_a_subclass_of_our_own_takes_its_parents_status() -> None:
    class Quota(errors.ValidationError):
        pass

    assert status_of(Quota("over the quota")) == 422
