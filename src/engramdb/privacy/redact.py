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

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from engramdb.models import RedactionPolicy
from engramdb.privacy._chars import b64json as _b64json
from engramdb.privacy._chars import char_classes as _classes
from engramdb.privacy._chars import entropy as _entropy
from engramdb.privacy._chars import luhn as _luhn
from engramdb.privacy._chars import random_enough as _random_enough
from engramdb.privacy._gate import literal_gate
from engramdb.privacy._settings import assignment as _assignment
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


_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]+\]")

# -- helpers (the character tests are in engramdb.privacy._chars) -----------------------------------------


# Values that stand for a secret without being one: templates, masks, variable references.
_PLACEHOLDER_VALUE = re.compile(
    r"""^(?:
        \*+ | [xX]{3,} | \.{3,} | … | -+ | _+ | \#+
      | <[^<>]*> | \[[^\[\]]*\] | \{[^{}]*\} | \{\{.*\}\} | \(\w*\)
      | \$\{.*\}? | \$\(.*\)? | \$[A-Za-z_][A-Za-z0-9_]* | %\(?[A-Za-z_]+\)?s | %[A-Za-z_]+%
      | (?:os\.environ|os\.getenv|process\.env|env|getenv|secrets|vars|ENV)\b.*
      | (?:your|my|the|some|a|an|example|sample|dummy|fake|test|placeholder)[-_]\w*
    )$""",
    re.VERBOSE,
)

# Words that follow "password:" or "token:" in documentation, schemas and prose, not secrets.
_STOPWORDS: Final = frozenset(
    """
    string str text int integer bool boolean number value values any object type none null nil true false
    undefined required optional empty blank missing invalid incorrect correct wrong expired revoked rotated
    reset changed change changeme updated set unset configured provided given hidden masked redacted secret
    password passwords token tokens key keys secrets credential credentials here below above omitted see same
    default yes no not never and the for from with without field fields please must should will is was are be
    been being required_field supplied stored sent used needed based auth authentication authorization
    example sample dummy placeholder todo tbd fixme xxx ignored n/a na bearer basic digest
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _credential_like(value: str, *, strict: bool) -> bool:
    """Whether ``value``, found after a word like "password", looks like an actual credential.

    ``strict`` applies to prose ("the password is X"): the value must mix character
    classes or be long and random; after an explicit assignment (``password=X``) any
    non-placeholder word of four or more characters counts, because configuration
    files hold literals there.
    """
    if _PLACEHOLDER.fullmatch(value) or _PLACEHOLDER_VALUE.match(value):
        return False
    # AWS (and many vendors) mark documentation keys with EXAMPLE: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.
    if value.lower() in _STOPWORDS or "EXAMPLE" in value:
        return False
    # A dotted or snake_case lower-case name is a variable reference in code, not a literal.
    if re.fullmatch(r"[a-z_][a-z_]*(?:\.[a-z_][a-z0-9_]*)+|[a-z]+(?:_[a-z]+)+|[a-z_][\w.]*\(.*\)?", value):
        return False
    if strict:
        if len(value) < 6:
            return False
        return _classes(value) >= 2 or (len(value) >= 16 and _entropy(value) >= 3.5)
    return len(value) >= 4


# -- detectors ----------------------------------------------------------------------------------------------

Match = re.Match[str]


@dataclass(frozen=True, slots=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    #: The group holding the secret (0: the whole match).
    group: int | str = 0
    check: Callable[[Match], bool] | None = None
    #: Computes the secret's span when a group is not enough (None: reject the match).
    span: Callable[[Match], tuple[int, int] | None] | None = None
    #: Literals of which every match contains at least one (lower case if the pattern ignores case; empty:
    #: none known): without any, the pattern is not run, see :mod:`~engramdb.privacy._gate`.
    needs: tuple[str, ...] = ()


def _body_random(m: Match) -> bool:
    return _random_enough(m.group("body"))


def _aws_key(m: Match) -> bool:
    value = m.group(0)
    # AWS documents its examples with keys ending in EXAMPLE (AKIAIOSFODNN7EXAMPLE): not secrets.
    return "EXAMPLE" not in value and _random_enough(value[4:])


def _aws_secret(m: Match) -> bool:
    value = m.group("v")
    return "EXAMPLE" not in value and _entropy(value) >= 3.5


def _jwt(m: Match) -> bool:
    header, payload = m.group(0).split(".")[:2]
    return _b64json(header) and _b64json(payload)


def _basic(m: Match) -> bool:
    try:
        decoded = base64.b64decode(m.group("v"), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return ":" in decoded


def _bearer(m: Match) -> bool:
    value = m.group("v")
    return len(value) >= 12 and _credential_like(value, strict=True)


def _url_password(m: Match) -> bool:
    value = m.group("v")
    if _PLACEHOLDER.fullmatch(value) or _PLACEHOLDER_VALUE.match(value):
        return False
    return value.lower() not in _STOPWORDS


def _tok(prefix: str, body: str) -> re.Pattern[str]:
    """A prefixed token format: ``prefix`` then a random ``body``, bounded on both sides."""
    return re.compile(rf"(?<![A-Za-z0-9_\-]){prefix}(?P<body>{body})(?![A-Za-z0-9_\-])")


# Words that name a credential. The word must END an identifier (DB_PASSWORD, github.token,
# x-api-key; token_count, password_hint and max_tokens do not qualify). Only the word itself is
# matched, never the identifier before it: a repeated prefix group would backtrack quadratically.
_KEYWORD = (
    r"(?:passw(?:or)?d|passphrase|pwd|pass|secret|token|api[_\-. ]?key|apikey|credentials?"
    r"|(?:access|secret|private|signing|encryption|master|license|auth|service|account|client|session)"
    r"[_\-. ]?(?:key|token|secret)|auth|sas|(?:php|j)?sess(?:ion)?[_\-]?id|connect\.sid)"
)
_GENERIC = re.compile(
    rf"""(?ix)
    (?<![A-Za-z0-9])(?P<name>{_KEYWORD})(?![A-Za-z0-9])["'\]]?
    (?: \s*(?P<op>:=|=>|==|=|:)\s* | \s+(?:(?:is|was|to|of|are)\s*:?\s*)? )
    (?: "(?P<dq>[^"\n]{{1,256}})" | '(?P<sq>[^'\n]{{1,256}})' | (?P<bare>[^\s'"`,;]{{1,256}}) )
    """
)


# "The password for the staging database is X": the word and its value a few words apart, in prose.
_PROSE_PASSWORD = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?P<name>password|passphrase|passcode|pwd)\s+(?:for|of|to)\s+(?:[\w'.\-]+\s+){0,4}?"
    r"(?:is|was)\s*:?\s+(?P<v>[^\s'\"`,;]{1,256})"
)
# Passwords given to a command line with -p (docker login, sshpass) or -a (redis-cli); mysql takes its password
# only attached ("-pS3cret"): "mysql -u app -p appdb" asks for it and names the database.
_PASSWORD_FLAG = re.compile(
    r"(?i)(?:\b(?:docker|podman|buildah|helm|sshpass|redis-cli|htpasswd|login)\b[^\n|;&]*?\s-(?:p|a)\s*"
    r"|\b(?:mysql|mysqldump|mariadb)\b[^\n|;&]*?\s-p)(?P<v>[^\s'\"`|;&-][^\s'\"`|;&]*)"
)


def _prose_span(m: Match) -> tuple[int, int] | None:
    start = m.start("v")
    value = m.group("v").rstrip(".:")
    if not _credential_like(value, strict=True) or _reference(value):
        return None
    return start, start + len(value)


def _generic_span(m: Match) -> tuple[int, int] | None:
    group = "dq" if m.group("dq") is not None else "sq" if m.group("sq") is not None else "bare"
    start, end = m.span(group)
    value = m.group(group)
    if group == "bare":
        # A full stop or colon ending a sentence, or the bracket closing a call, is not part of the value.
        trimmed = value.rstrip(".:")
        while (
            trimmed
            and trimmed[-1] in ")]}"
            and trimmed.count(trimmed[-1]) > trimmed.count("([{"[")]}".index(trimmed[-1])])
        ):
            trimmed = trimmed[:-1].rstrip(".:")
        end -= len(value) - len(trimmed)
        value = trimmed
    explicit = m.group("op") is not None
    if explicit and _label(m, value):
        # "auth: refresh OAuth token on 401": a topic label before a sentence, not an assignment.
        explicit = False
    value = value.strip()
    if not value or not _credential_like(value, strict=not explicit):
        return None
    name = m.group("name")
    # In prose "pass" is a verb ("pass --no-verify"), and a flag or an assignment after a word is what it names.
    if m.group("op") is None and (name.lower() == "pass" or _assignment(value)):
        return None
    if _reference(value) or (_PASSWORD_WORD.search(name) is None and _setting(value)):
        return None
    return start, end


# A lower-case word followed by more words: the start of a sentence.
_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z0-9][\w'\-]*[ \t]+[A-Za-z0-9]")


def _label(m: Match, value: str) -> bool:
    """Whether ``name: value`` reads as a label and prose (a commit subject, a note) rather than a setting.

    Only for a colon followed by a space, a bare value of lower-case letters and more
    words after it, and never after a password word; ``auth:`` and ``token:`` as labels are common ("auth: refresh the
    token", "token: rotate weekly"). The value is then judged as prose is (strictly).
    """
    if m.group("op").strip() != ":" or m.group("bare") is None or not value.isalpha() or not value.islower():
        return False
    if not m.string[m.end("op") : m.end("op") + 1].isspace() or _PASSWORD_WORD.search(m.group("name")):
        return False
    return _PROSE_AFTER.match(m.string, m.end("bare")) is not None


_DETECTORS: Final[tuple[_Detector, ...]] = (
    # Private keys first: their bodies contain runs that look like other tokens.
    _Detector(
        "private_key",
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:[\s\S]*?-----END (?P=label)-----|(?:[A-Za-z0-9+/=:,\-. \t\r\n]|\\[nrt])*)"
        ),
        needs=("-----BEGIN ",),
    ),
    _Detector(
        "private_key",
        re.compile(r"PuTTY-User-Key-File-\d:[^\n]*(?:\n[^\n]*){0,4}?\nPrivate-Lines: \d+\s*(?:[A-Za-z0-9+/=]+\s*)+"),
        needs=("PuTTY-User-Key-File-",),
    ),
    _Detector(
        "jwt",
        re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"),
        check=_jwt,
        needs=("eyJ",),
    ),
    _Detector(
        "aws_access_key",
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
        check=_aws_key,
        needs=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    _Detector(
        "aws_secret_key",
        re.compile(
            r"(?i)aws[_\-. ]?secret[_\-. ]?(?:access[_\-. ]?)?key[\"'\]]?\s*(?::|=|=>|\s)\s*[\"']?"
            r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        group="v",
        check=_aws_secret,
        needs=("aws",),
    ),
    _Detector("gcp_api_key", _tok("AIza", r"[0-9A-Za-z_\-]{35}"), check=_body_random, needs=("AIza",)),
    _Detector("gcp_oauth_token", _tok(r"ya29\.", r"[0-9A-Za-z_\-]{30,}"), check=_body_random, needs=("ya29.",)),
    _Detector("google_oauth_secret", _tok("GOCSPX-", r"[A-Za-z0-9_\-]{28}"), check=_body_random, needs=("GOCSPX-",)),
    _Detector(
        "azure_storage_key",
        re.compile(r"(?i)(?:AccountKey|SharedAccessKey)\s*=\s*(?P<v>[A-Za-z0-9+/]{40,}={0,2})"),
        group="v",
        needs=("accountkey", "sharedaccesskey"),
    ),
    _Detector("azure_sas_token", re.compile(r"(?i)[?&]sig=(?P<v>[A-Za-z0-9%+/=]{30,})"), group="v", needs=("sig=",)),
    _Detector(
        "azure_client_secret",
        re.compile(
            r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}\dQ~(?P<body>[A-Za-z0-9_~.\-]{31,34})(?![A-Za-z0-9_~.\-])"
        ),
        check=_body_random,
        needs=("Q~",),
    ),
    _Detector(
        "github_token",
        _tok(r"(?:ghp|gho|ghu|ghs|ghr)_", r"[A-Za-z0-9]{36,251}"),
        check=_body_random,
        needs=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    _Detector("github_token", _tok("github_pat_", r"[A-Za-z0-9_]{50,251}"), check=_body_random, needs=("github_pat_",)),
    _Detector(
        "gitlab_token",
        _tok(r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-", r"[A-Za-z0-9_\-]{20,1024}"),
        check=_body_random,
        needs=("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"),
    ),
    _Detector("gitlab_token", _tok("GR1348941", r"[A-Za-z0-9_\-]{20,50}"), check=_body_random, needs=("GR1348941",)),
    _Detector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"),
        needs=("https://hooks.slack.com/",),
    ),
    _Detector("slack_token", _tok(r"xox[abposre]-", r"[A-Za-z0-9\-]{10,250}"), check=_body_random, needs=("xox",)),
    _Detector("slack_token", _tok(r"xapp-\d-", r"[A-Za-z0-9\-]{10,250}"), check=_body_random, needs=("xapp-",)),
    _Detector(
        "stripe_key",
        _tok(r"(?:sk|rk)_(?:live|test)_", r"[A-Za-z0-9]{16,247}"),
        check=_body_random,
        needs=("_live_", "_test_"),
    ),
    _Detector("stripe_key", _tok("whsec_", r"[A-Za-z0-9]{24,}"), check=_body_random, needs=("whsec_",)),
    _Detector(
        "anthropic_key",
        _tok(r"sk-ant-[a-z]{2,8}\d{0,3}-", r"[A-Za-z0-9_\-]{32,}"),
        check=_body_random,
        needs=("sk-ant-",),
    ),
    _Detector(
        "openai_key",
        _tok(r"sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?", r"[A-Za-z0-9_\-]{32,}"),
        check=lambda m: _random_enough(m.group("body")) and _classes(m.group("body")) >= 2,
        needs=("sk-",),
    ),
    _Detector("huggingface_token", _tok("hf_", r"[A-Za-z0-9]{30,40}"), check=_body_random, needs=("hf_",)),
    _Detector("npm_token", _tok("npm_", r"[A-Za-z0-9]{36}"), check=_body_random, needs=("npm_",)),
    _Detector(
        "pypi_token",
        _tok("pypi-AgEIcHlwaS5vcmc", r"[A-Za-z0-9_\-]{50,}"),
        check=_body_random,
        needs=("pypi-AgEIcHlwaS5vcmc",),
    ),
    _Detector(
        "sendgrid_key", _tok(r"SG\.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"), check=_body_random, needs=("SG.",)
    ),
    _Detector("twilio_key", _tok("SK", r"[0-9a-f]{32}"), check=_body_random, needs=("SK",)),
    _Detector("mailchimp_key", re.compile(r"(?<![A-Za-z0-9])[0-9a-f]{32}-us\d{1,2}(?![A-Za-z0-9])"), needs=("-us",)),
    _Detector("digitalocean_token", _tok(r"do[opr]_v1_", r"[a-f0-9]{64}"), check=_body_random, needs=("_v1_",)),
    _Detector(
        "shopify_token",
        _tok(r"shp(?:at|ca|pa|ss)_", r"[a-fA-F0-9]{32}"),
        check=_body_random,
        needs=("shpat_", "shpca_", "shppa_", "shpss_"),
    ),
    _Detector(
        "telegram_token", re.compile(r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])"), needs=(":AA",)
    ),
    _Detector(
        "discord_token",
        re.compile(
            r"(?<![A-Za-z0-9_\-])[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}(?![A-Za-z0-9_\-])"
        ),
        check=lambda m: _classes(m.group(0)) >= 3,
        needs=(".",),
    ),
    # Headers and URLs: the credential after the scheme word, not the word itself.
    _Detector(
        "basic_auth",
        re.compile(r"(?i)\bbasic\s+(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        group="v",
        check=_basic,
        needs=("basic",),
    ),
    _Detector(
        "bearer_token",
        re.compile(r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9\-._~+/]{8,}=*)"),
        group="v",
        check=_bearer,
        needs=("bearer",),
    ),
    _Detector(
        "bearer_token",
        re.compile(
            r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:token|apikey|api-key|key|sso-key|hmac)\s+(?P<v>[^\s\"']{8,})"
        ),
        group="v",
        check=_bearer,
        needs=("authorization",),
    ),
    _Detector(
        "url_password",
        # The password runs to the LAST "@" before the host: unencoded "@" and "#" in passwords are common.
        re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://(?P<user>[^\s:/?#@\[\]\"']*):(?P<v>[^\s/?\"']+)@(?=[^\s@/?\"']+)"),
        group="v",
        check=_url_password,
        needs=("://",),
    ),
    _Detector(
        "password",
        _PASSWORD_FLAG,
        group="v",
        check=lambda m: _credential_like(m.group("v"), strict=False),
        needs=("docker", "podman", "buildah", "helm", "mysql", "mariadb", "sshpass", "redis-cli", "htpasswd", "login"),
    ),
    _Detector("password", _PROSE_PASSWORD, span=_prose_span, needs=("password", "passphrase", "passcode", "pwd")),
    # Last: a value after a word like password/secret/token. The kind says which word.
    _Detector(
        "credential",
        _GENERIC,
        span=_generic_span,
        needs=("pass", "pwd", "secret", "token", "key", "credential", "auth", "sas", "sess", "connect.sid"),
    ),
)

_PASSWORD_WORD = re.compile(r"(?i)(?:passw(?:or)?d|passphrase|pwd|pass)$")

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
_GATE: Final = literal_gate([(det.pattern, det.needs) for det in _DETECTORS])


def _find_secrets(text: str) -> Iterator[tuple[int, Finding]]:
    for priority in _GATE(text):
        det = _DETECTORS[priority]
        for m in det.pattern.finditer(text):
            if det.check is not None and not det.check(m):
                continue
            span = det.span(m) if det.span is not None else m.span(det.group)
            if span is None:
                continue
            start, end = span
            if start == end or _PLACEHOLDER.fullmatch(text, start, end):
                continue
            kind = det.kind
            if kind == "credential" and _PASSWORD_WORD.search(m.group("name")):
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
        base = len(_DETECTORS)
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
_SECRET_KEY = re.compile(rf"(?i)^(?:[A-Za-z0-9]+[_.\- ])*{_KEYWORD}$")


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
        is_password = key is not None and _PASSWORD_WORD.search(key.strip()) is not None
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
    if not stripped or _PLACEHOLDER.fullmatch(stripped) or _PLACEHOLDER_VALUE.match(stripped):
        return False
    if stripped.lower() in _STOPWORDS or _reference(stripped) or (not password and _setting(stripped)):
        return False
    # Prose under a key named "token" ("rotated every 90 days") is a description, not a value;
    # a passphrase under "password" may have a few words.
    return len(stripped.split()) <= (6 if password else 2)


#: Every kind of secret a placeholder may name.
SECRET_KINDS: Final = frozenset(d.kind for d in _DETECTORS) | {"password"}
#: Every kind of personal data a placeholder may name.
PII_KINDS: Final = frozenset({"email", "phone", "card_number"})
