"""The write path's fast paths change nothing: the redaction gate and the shared JSON encoders.

The gate skips a secret detector when none of its needed literals is in the text; these tests
run every detector ungated on the same inputs (the redaction tests' secrets and look-alikes,
prose, non-ASCII case variants, random text) and require identical findings.
"""

from __future__ import annotations

import importlib.util
import json
import random
import string
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.errors import ValidationError
from engramdb.models import RedactionPolicy
from engramdb.privacy import _detectors, redact
from engramdb.storage import _codecs


def _redaction_tests() -> object:
    """The redaction tests' module, for its secrets and look-alikes (loaded by path: tests is no package)."""
    spec = importlib.util.spec_from_file_location(
        "_ingest_redact_samples", Path(__file__).parent / "privacy" / "test_redact.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


_samples = _redaction_tests()
SECRETS: list[tuple[str, str, str]] = _samples.SECRETS  # type: ignore[attr-defined]
LOOKALIKES: list[str] = _samples.LOOKALIKES  # type: ignore[attr-defined]
PII = RedactionPolicy(secrets=True, pii=True)
rng = random.Random(11)

PROSE = [
    "Caroline: I'm going to pass on that one, thanks.",
    "Melanie: The key to a good pie is cold butter.",
    "The author signed my copy! Auth is hard, tokens expire.",
    "password for the wifi is on the fridge",
    "my password is Tr0ub4dor&3 now",
    "docker login -u me -p Xk9#mPq2vL registry",
    "see https://user:pa55w0rd@example.org/x and sig=" + "A" * 40,
    "",
    "a.b.c",
    "turn",
    "D1:3",
]
# Unicode case variants: a case-insensitive pattern can match text whose lower case lacks the literal.
UNICODE = [
    "paſſword=hunter2x9",
    "PAſSWORD: Zq8#kLm2",
    "BEARER ſk" + "a" * 30,
    "pass\u212aey=abcd1234",  # Kelvin sign: matches k under IGNORECASE
    "пароль password=Ab12cd34ef",
    "\u0130NTERNAL token: Zx8#Pq2mLk",
]


def ungated(text: str) -> Iterator[tuple[int, redact.Finding]]:
    """What :func:`redact._find_secrets` yields with every detector run."""
    gate = redact._GATE
    try:
        redact._GATE = lambda t: range(len(_detectors.DETECTORS))  # type: ignore[misc]
        yield from list(redact._find_secrets(text))
    finally:
        redact._GATE = gate  # type: ignore[misc]


def corpus() -> list[str]:
    texts = [template.format(secret) for _, secret, template in SECRETS] + list(LOOKALIKES) + PROSE + UNICODE
    texts += [secret for _, secret, _ in SECRETS]
    # Each secret inside prose, in upper and lower case (case-insensitive detectors see both).
    texts += [f"note: {template.format(secret)} ok".upper() for _, secret, template in SECRETS]
    texts += [f"note: {template.format(secret)} ok".lower() for _, secret, template in SECRETS]
    return texts


@pytest.mark.parametrize("text", corpus())
def test_the_gate_changes_no_finding(text: str) -> None:
    assert list(redact._find_secrets(text)) == list(ungated(text))


def test_the_corpus_exercises_the_detectors() -> None:
    # Not vacuous: most secrets are found, and by most of the detectors.
    found = {p for t in corpus() for p, _ in redact._find_secrets(t)}
    assert len(found) >= 20


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200))
def test_the_gate_changes_nothing_on_random_text(text: str) -> None:
    assert list(redact._find_secrets(text)) == list(ungated(text))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["pass", "word", "key", "token", "=", ": ", " is ", "Bearer ", "sk-", "ghp_", "AKIA", "://", "@", "ſ", "K"]
            + [rng.choice(string.ascii_letters + string.digits) * 3 for _ in range(10)]
            + ["".join(rng.choice(string.ascii_letters + string.digits) for _ in range(40))]
        ),
        max_size=12,
    )
)
def test_the_gate_changes_nothing_on_secret_shaped_text(parts: list[str]) -> None:
    text = "".join(parts)
    assert list(redact._find_secrets(text)) == list(ungated(text))


def test_every_match_holds_a_needed_literal() -> None:
    # The gate's premise, checked detector by detector on every match in the corpus.
    for text in corpus():
        folded = text.lower()
        for det in _detectors.DETECTORS:
            if not det.needs:
                continue
            folds = bool(det.pattern.flags & redact.re.IGNORECASE)
            if folds and not text.isascii():
                continue  # the gate lets every case-insensitive detector run on such text
            where = folded if folds else text
            for _ in det.pattern.finditer(text):
                assert any(n in where for n in det.needs), (det.kind, text)


def test_redaction_results_are_unchanged_with_personal_data() -> None:
    for text in corpus():
        gated = redact.find(text, policy=PII)
        gate = redact._GATE
        try:
            redact._GATE = lambda t: range(len(_detectors.DETECTORS))  # type: ignore[misc]
            assert redact.find(text, policy=PII) == gated
        finally:
            redact._GATE = gate  # type: ignore[misc]


@pytest.mark.parametrize(
    "value",
    [
        {"turn": "D1:3", "n": 3, "f": 0.5, "b": True, "none": None, "nested": {"a": [1, "é", {"b": 2}]}},
        ["ü", 1.25, -0.0, 10**20],
        "plain",
        {},
    ],
)
def test_the_shared_encoders_write_what_json_dumps_writes(value: object) -> None:
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert _codecs.dumps(value, what="x") == compact
    if isinstance(value, dict):
        audit = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
        assert _codecs._AUDIT_DETAIL.encode(value) == audit


def test_the_shared_encoder_still_rejects_what_json_rejects() -> None:
    with pytest.raises(ValidationError, match="must be JSON-serializable"):
        _codecs.dumps({"x": float("nan")}, what="metadata")
    with pytest.raises(ValidationError, match="must be JSON-serializable"):
        _codecs.dumps({"x": object()}, what="metadata")


def test_jsonable_fast_path_keeps_the_conversions() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    value = {"at": at, "t": ("a", 1), 2: {"x": [at]}, "s": "s", "i": 1, "b": False, "n": None}
    assert _codecs.jsonable(value) == {
        "at": _codecs.ts(at),
        "t": ["a", 1],
        "2": {"x": [_codecs.ts(at)]},
        "s": "s",
        "i": 1,
        "b": False,
        "n": None,
    }
