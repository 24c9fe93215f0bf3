"""Redaction of secrets and personal data before anything is embedded, indexed or written. Pure.

Every detector finds *spans*; overlapping spans merge and each is replaced by a
typed placeholder such as ``[REDACTED:aws_access_key]``. Callers learn which
kinds were replaced, never the values. Redaction is idempotent: a placeholder is
never detected again, so ``redact(redact(x)) == redact(x)``.

Why a curated pattern set rather than a scanner library: the mainstream one,
Yelp's ``detect-secrets``, is a line-oriented repository scanner. It reports
secret *values* rather than spans, recognises a private key by its ``BEGIN``
line only (the key body would survive a redaction), has no patterns for several
current formats (Anthropic and OpenAI project keys, Google API keys, bearer
headers), tunes its keyword heuristics for source files, and imports ``requests``
for its online verifiers. A curated set of the published token formats, the
common practice of gitleaks and GitHub secret scanning, fits redaction better;
``bench/redaction.py`` measures both on the same labelled corpus. Phone numbers
are the exception: parsing them well is hard, so Google's ``phonenumbers`` does it.

What survives on purpose (documented look-alikes): git SHAs, UUIDs and content
hashes (no high-entropy detector without a context word: they would all go), base64
data URIs, placeholders (``<token>``, ``${API_KEY}``, ``xxxx``, ``********``),
AWS's documented example keys (``...EXAMPLE``), and, for personal data,
addresses at reserved documentation domains (``example.com``, ``.test``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from engramdb.models import RedactionPolicy
from engramdb.privacy._chars import luhn as _luhn
from engramdb.privacy._detectors import DETECTORS, KEYWORD, PASSWORD_WORD, PLACEHOLDER, PLACEHOLDER_VALUE, STOPWORDS
from engramdb.privacy._gate import literal_gate
from engramdb.privacy._settings import reference as _reference
from engramdb.privacy._settings import setting as _setting

__all__ = [
    "PII_KINDS",
    "SECRET_KINDS",
    "Finding",
    "Redaction",
    "find",
    "placeholder",
    "redact_text",
    "redact_value",
]

#: Secrets only, the default of every function here.
_DEFAULT_POLICY: Final = RedactionPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A span of text to replace, and the kind of secret or personal data it holds."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Redaction:
    """The redacted text and the kinds that were replaced (sorted, distinct)."""

    text: str
    kinds: tuple[str, ...] = ()


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])(?P<v>[A-Za-z0-9._%+\-]{1,64}@(?P<domain>(?:[A-Za-z0-9\-]{1,63}\.)+[A-Za-z]{2,24}))"
    r"(?![A-Za-z0-9\-]|\.[A-Za-z0-9]|:[A-Za-z0-9_./~])"
)
# Reserved for documentation (RFC 2606, RFC 6761): addresses there belong to nobody.
_DOC_DOMAIN = re.compile(r"(?i)(?:^|\.)(?:example\.(?:com|org|net)|example|test|invalid|localhost)$")
# Bounded by non-alphanumerics on both sides: digit runs inside ids and UUIDs are not cards.
_CARD = re.compile(r"(?<![0-9A-Za-z\-])(?:\d[ \-]?){12,18}\d(?![0-9A-Za-z]|-[0-9A-Za-z])")
# Issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay).
_CARD_IIN = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|6011|65|64[4-9]|35|3[068]|62)")


def _find_pii(text: str, policy: RedactionPolicy) -> Iterator[Finding]:
    for m in _EMAIL.finditer(text):
        if not _DOC_DOMAIN.search(m.group("domain")):
            yield Finding(kind="email", start=m.start("v"), end=m.end("v"))
    for m in _CARD.finditer(text):
        digits = re.sub(r"[ \-]", "", m.group(0))
        if 13 <= len(digits) <= 19 and _CARD_IIN.match(digits) and _luhn(digits):
            yield Finding(kind="card_number", start=m.start(), end=m.end())
    if any(ch.isdigit() for ch in text):
        yield from _find_phones(text, policy.phone_region)


def _find_phones(text: str, region: str) -> Iterator[Finding]:
    # Imported on first use: only stores with personal-data redaction pay for its metadata.
    import phonenumbers

    for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
        yield Finding(kind="phone", start=match.start, end=match.end)


#: The detectors (their priorities) that may match a text; see :mod:`~engramdb.privacy._gate`.
_GATE: Final = literal_gate([(det.pattern, det.needs) for det in DETECTORS])


def _find_secrets(text: str) -> Iterator[tuple[int, Finding]]:
    for priority in _GATE(text):
        det = DETECTORS[priority]
        for m in det.pattern.finditer(text):
            if det.check is not None and not det.check(m):
                continue
            span = det.span(m) if det.span is not None else m.span(det.group)
            if span is None:
                continue
            start, end = span
            if start == end or PLACEHOLDER.fullmatch(text, start, end):
                continue
            kind = det.kind
            if kind == "credential" and PASSWORD_WORD.search(m.group("name")):
                kind = "password"
            yield priority, Finding(kind=kind, start=start, end=end)


def find(text: str, *, policy: RedactionPolicy = _DEFAULT_POLICY) -> list[Finding]:
    """Non-overlapping spans of ``text`` to redact, in order.

    Overlapping findings merge into one span that takes the kind of the most
    specific detector (a JWT inside a bearer header is a ``jwt``).
    """
    found: list[tuple[int, Finding]] = []
    if policy.secrets:
        found.extend(_find_secrets(text))
    if policy.pii:
        base = len(DETECTORS)
        pii = list(_find_pii(text, policy))
        # Card numbers before phones: a card number is also a long run of digits.
        order = {"email": 0, "card_number": 1, "phone": 2}
        found.extend((base + order[f.kind], f) for f in pii)
    if not found:
        return []
    found.sort(key=lambda pf: (pf[1].start, -pf[1].end, pf[0]))
    merged: list[tuple[int, Finding]] = []
    for prio, f in found:
        if merged and f.start < merged[-1][1].end:
            last_prio, last = merged[-1]
            best_prio, kind = (prio, f.kind) if prio < last_prio else (last_prio, last.kind)
            merged[-1] = (best_prio, Finding(kind=kind, start=last.start, end=max(last.end, f.end)))
        else:
            merged.append((prio, f))
    return [f for _, f in merged]


def redact_text(text: str, *, policy: RedactionPolicy = _DEFAULT_POLICY) -> Redaction:
    """``text`` with every finding replaced by its placeholder, and the kinds replaced."""
    findings = find(text, policy=policy) if policy.enabled else []
    if not findings:
        return Redaction(text=text)
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos : f.start])
        parts.append(placeholder(f.kind))
        pos = f.end
    parts.append(text[pos:])
    return Redaction(text="".join(parts), kinds=tuple(sorted({f.kind for f in findings})))


# A metadata key naming a credential: its whole (string) value is one.
_SECRET_KEY = re.compile(rf"(?i)^(?:[A-Za-z0-9]+[_.\- ])*{KEYWORD}$")


def redact_value(value: Any, *, policy: RedactionPolicy = _DEFAULT_POLICY) -> tuple[Any, tuple[str, ...]]:
    """A JSON value (metadata) with secrets redacted in every string, at any depth, keys included.

    A string under a key that names a credential (``password``, ``db_password``,
    ``api_key``, ``client_secret``, ...) is replaced whole, since there the value
    is the secret whatever it looks like. With personal data on, integers that
    are card numbers are replaced too. Returns the new value and the kinds replaced.
    """
    if not policy.enabled:
        return value, ()
    kinds: set[str] = set()
    out = _redact_json(value, policy, kinds, key=None)
    return out, tuple(sorted(kinds))


def _redact_json(value: Any, policy: RedactionPolicy, kinds: set[str], *, key: str | None) -> Any:
    if isinstance(value, str):
        is_password = key is not None and PASSWORD_WORD.search(key.strip()) is not None
        named = key is not None and _SECRET_KEY.match(key.strip()) is not None
        if policy.secrets and named and _whole_value_secret(value, password=is_password):
            kind = "password" if is_password else "credential"
            # Keep what a detector would call it more precisely (an AWS key under "secret").
            inner = redact_text(value, policy=policy)
            found = [k for k in inner.kinds if k not in ("password", "credential")]
            kinds.update(found or [kind])
            return placeholder(found[0] if len(found) == 1 and inner.text == placeholder(found[0]) else kind)
        result = redact_text(value, policy=policy)
        kinds.update(result.kinds)
        return result.text
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            new_key = _redact_json(k, policy, kinds, key=None) if isinstance(k, str) else k
            while new_key in out:  # two keys redacted to the same placeholder: keep both
                new_key = f"{new_key}'"
            out[new_key] = _redact_json(v, policy, kinds, key=k if isinstance(k, str) else None)
        return out
    if isinstance(value, list | tuple):
        return [_redact_json(v, policy, kinds, key=key) for v in value]
    if policy.pii and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        digits = str(value)
        if 13 <= len(digits) <= 19 and _CARD_IIN.match(digits) and _luhn(digits):
            kinds.add("card_number")
            return placeholder("card_number")
    return value


def _whole_value_secret(value: str, *, password: bool) -> bool:
    stripped = value.strip()
    if not stripped or PLACEHOLDER.fullmatch(stripped) or PLACEHOLDER_VALUE.match(stripped):
        return False
    if stripped.lower() in STOPWORDS or _reference(stripped) or (not password and _setting(stripped)):
        return False
    # Prose under a key named "token" ("rotated every 90 days") is a description, not a value;
    # a passphrase under "password" may have a few words.
    return len(stripped.split()) <= (6 if password else 2)


#: Every kind of secret a placeholder may name.
SECRET_KINDS: Final = frozenset(d.kind for d in DETECTORS) | {"password"}
#: Every kind of personal data a placeholder may name.
PII_KINDS: Final = frozenset({"email", "phone", "card_number"})
