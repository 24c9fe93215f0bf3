"""engramdb.validate: the public surface of the input checks that interfaces and integrations use."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engramdb._validate as private
from engramdb import validate
from engramdb.errors import ConfigError, ValidationError


def test_every_check_is_the_librarys_own_not_a_copy():
    shared = [n for n in validate.__all__ if hasattr(private, n)]
    assert shared
    assert all(getattr(validate, n) is getattr(private, n) for n in shared)


@given(st.text(max_size=30))
def test_a_rate_filter_parses_or_fails_with_the_librarys_error(text):
    error: ValidationError | None = None
    try:
        validate.parse_rate_filter(text)
    except ValidationError as exc:
        error = exc
    assert error is None or "\n" not in str(error)


def test_a_rate_filter_reads_percentages():
    assert validate.parse_rate_filter(">80%") == validate.parse_rate_filter(">0.8")
    with pytest.raises(ValidationError):
        validate.parse_rate_filter("most of the time")


def test_an_audit_action_is_checked_against_the_trail():
    assert validate.check_action("create") == "create"
    with pytest.raises(ValidationError, match="unknown audit action"):
        validate.check_action("teleport")
    with pytest.raises(ValidationError):
        validate.check_action(42)


def test_a_retention_policy_file_is_read_and_checked(tmp_path: Path):
    good = tmp_path / "policy.toml"
    good.write_text("[conversation]\nmax_age_days = 30\n", encoding="utf-8")
    policy = validate.load_policy(good)
    rule = policy.rule_for("conversation")
    assert rule is not None
    assert rule.max_age_days == 30
    assert validate.load_policy(tmp_path / "missing.toml").empty
    bad = tmp_path / "bad.toml"
    bad.write_text("[conversation\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        validate.load_policy(bad)
