"""What a secret looks like: a detector per published token format, and credentials after their names. Pure.

Each :class:`Detector` is a pattern, the group or span of the secret in a match, an optional validity test and
the literals every match contains (what :mod:`~engramdb.privacy._gate` looks for first). :data:`DETECTORS` is in
priority order: where findings overlap, :func:`engramdb.privacy.redact.find` keeps the kind of the earlier one.
The character tests are in :mod:`engramdb.privacy._chars`; what counts as a setting or a reference rather than
a secret, in :mod:`engramdb.privacy._settings`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from engramdb.privacy._chars import b64json as _b64json
from engramdb.privacy._chars import char_classes as _classes
from engramdb.privacy._chars import entropy as _entropy
from engramdb.privacy._chars import random_enough as _random_enough
from engramdb.privacy._settings import assignment as _assignment
from engramdb.privacy._settings import reference as _reference
from engramdb.privacy._settings import setting as _setting

__all__ = [
    "DETECTORS",
    "KEYWORD",
    "PASSWORD_WORD",
    "PLACEHOLDER",
    "PLACEHOLDER_VALUE",
    "STOPWORDS",
    "Detector",
]

#: A placeholder already in the text: never detected again, so redaction is idempotent.
PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]+\]")

# Values that stand for a secret without being one: templates, masks, variable references.
PLACEHOLDER_VALUE = re.compile(
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
STOPWORDS: Final = frozenset(
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
    if PLACEHOLDER.fullmatch(value) or PLACEHOLDER_VALUE.match(value):
        return False
    # AWS (and many vendors) mark documentation keys with EXAMPLE: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.
    if value.lower() in STOPWORDS or "EXAMPLE" in value:
        return False
    # A dotted or snake_case lower-case name is a variable reference in code, not a literal.
    if re.fullmatch(r"[a-z_][a-z_]*(?:\.[a-z_][a-z0-9_]*)+|[a-z]+(?:_[a-z]+)+|[a-z_][\w.]*\(.*\)?", value):
        return False
    if strict:
        if len(value) < 6:
            return False
        return _classes(value) >= 2 or (len(value) >= 16 and _entropy(value) >= 3.5)
    return len(value) >= 4


Match = re.Match[str]


@dataclass(frozen=True, slots=True)
class Detector:
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
    if PLACEHOLDER.fullmatch(value) or PLACEHOLDER_VALUE.match(value):
        return False
    return value.lower() not in STOPWORDS


def _tok(prefix: str, body: str) -> re.Pattern[str]:
    """A prefixed token format: ``prefix`` then a random ``body``, bounded on both sides."""
    return re.compile(rf"(?<![A-Za-z0-9_\-]){prefix}(?P<body>{body})(?![A-Za-z0-9_\-])")


# Words that name a credential. The word must END an identifier (DB_PASSWORD, github.token,
# x-api-key; token_count, password_hint and max_tokens do not qualify). Only the word itself is
# matched, never the identifier before it: a repeated prefix group would backtrack quadratically.
KEYWORD = (
    r"(?:passw(?:or)?d|passphrase|pwd|pass|secret|token|api[_\-. ]?key|apikey|credentials?"
    r"|(?:access|secret|private|signing|encryption|master|license|auth|service|account|client|session)"
    r"[_\-. ]?(?:key|token|secret)|auth|sas|(?:php|j)?sess(?:ion)?[_\-]?id|connect\.sid)"
)
_GENERIC = re.compile(
    rf"""(?ix)
    (?<![A-Za-z0-9])(?P<name>{KEYWORD})(?![A-Za-z0-9])["'\]]?
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
    if _reference(value) or (PASSWORD_WORD.search(name) is None and _setting(value)):
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
    if not m.string[m.end("op") : m.end("op") + 1].isspace() or PASSWORD_WORD.search(m.group("name")):
        return False
    return _PROSE_AFTER.match(m.string, m.end("bare")) is not None


DETECTORS: Final[tuple[Detector, ...]] = (
    # Private keys first: their bodies contain runs that look like other tokens.
    Detector(
        "private_key",
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:[\s\S]*?-----END (?P=label)-----|(?:[A-Za-z0-9+/=:,\-. \t\r\n]|\\[nrt])*)"
        ),
        needs=("-----BEGIN ",),
    ),
    Detector(
        "private_key",
        re.compile(r"PuTTY-User-Key-File-\d:[^\n]*(?:\n[^\n]*){0,4}?\nPrivate-Lines: \d+\s*(?:[A-Za-z0-9+/=]+\s*)+"),
        needs=("PuTTY-User-Key-File-",),
    ),
    Detector(
        "jwt",
        re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"),
        check=_jwt,
        needs=("eyJ",),
    ),
    Detector(
        "aws_access_key",
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
        check=_aws_key,
        needs=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    Detector(
        "aws_secret_key",
        re.compile(
            r"(?i)aws[_\-. ]?secret[_\-. ]?(?:access[_\-. ]?)?key[\"'\]]?\s*(?::|=|=>|\s)\s*[\"']?"
            r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        group="v",
        check=_aws_secret,
        needs=("aws",),
    ),
    Detector("gcp_api_key", _tok("AIza", r"[0-9A-Za-z_\-]{35}"), check=_body_random, needs=("AIza",)),
    Detector("gcp_oauth_token", _tok(r"ya29\.", r"[0-9A-Za-z_\-]{30,}"), check=_body_random, needs=("ya29.",)),
    Detector("google_oauth_secret", _tok("GOCSPX-", r"[A-Za-z0-9_\-]{28}"), check=_body_random, needs=("GOCSPX-",)),
    Detector(
        "azure_storage_key",
        re.compile(r"(?i)(?:AccountKey|SharedAccessKey)\s*=\s*(?P<v>[A-Za-z0-9+/]{40,}={0,2})"),
        group="v",
        needs=("accountkey", "sharedaccesskey"),
    ),
    Detector("azure_sas_token", re.compile(r"(?i)[?&]sig=(?P<v>[A-Za-z0-9%+/=]{30,})"), group="v", needs=("sig=",)),
    Detector(
        "azure_client_secret",
        re.compile(
            r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}\dQ~(?P<body>[A-Za-z0-9_~.\-]{31,34})(?![A-Za-z0-9_~.\-])"
        ),
        check=_body_random,
        needs=("Q~",),
    ),
    Detector(
        "github_token",
        _tok(r"(?:ghp|gho|ghu|ghs|ghr)_", r"[A-Za-z0-9]{36,251}"),
        check=_body_random,
        needs=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    Detector("github_token", _tok("github_pat_", r"[A-Za-z0-9_]{50,251}"), check=_body_random, needs=("github_pat_",)),
    Detector(
        "gitlab_token",
        _tok(r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-", r"[A-Za-z0-9_\-]{20,1024}"),
        check=_body_random,
        needs=("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"),
    ),
    Detector("gitlab_token", _tok("GR1348941", r"[A-Za-z0-9_\-]{20,50}"), check=_body_random, needs=("GR1348941",)),
    Detector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"),
        needs=("https://hooks.slack.com/",),
    ),
    Detector("slack_token", _tok(r"xox[abposre]-", r"[A-Za-z0-9\-]{10,250}"), check=_body_random, needs=("xox",)),
    Detector("slack_token", _tok(r"xapp-\d-", r"[A-Za-z0-9\-]{10,250}"), check=_body_random, needs=("xapp-",)),
    Detector(
        "stripe_key",
        _tok(r"(?:sk|rk)_(?:live|test)_", r"[A-Za-z0-9]{16,247}"),
        check=_body_random,
        needs=("_live_", "_test_"),
    ),
    Detector("stripe_key", _tok("whsec_", r"[A-Za-z0-9]{24,}"), check=_body_random, needs=("whsec_",)),
    Detector(
        "anthropic_key",
        _tok(r"sk-ant-[a-z]{2,8}\d{0,3}-", r"[A-Za-z0-9_\-]{32,}"),
        check=_body_random,
        needs=("sk-ant-",),
    ),
    Detector(
        "openai_key",
        _tok(r"sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?", r"[A-Za-z0-9_\-]{32,}"),
        check=lambda m: _random_enough(m.group("body")) and _classes(m.group("body")) >= 2,
        needs=("sk-",),
    ),
    Detector("huggingface_token", _tok("hf_", r"[A-Za-z0-9]{30,40}"), check=_body_random, needs=("hf_",)),
    Detector("npm_token", _tok("npm_", r"[A-Za-z0-9]{36}"), check=_body_random, needs=("npm_",)),
    Detector(
        "pypi_token",
        _tok("pypi-AgEIcHlwaS5vcmc", r"[A-Za-z0-9_\-]{50,}"),
        check=_body_random,
        needs=("pypi-AgEIcHlwaS5vcmc",),
    ),
    Detector(
        "sendgrid_key", _tok(r"SG\.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"), check=_body_random, needs=("SG.",)
    ),
    Detector("twilio_key", _tok("SK", r"[0-9a-f]{32}"), check=_body_random, needs=("SK",)),
    Detector("mailchimp_key", re.compile(r"(?<![A-Za-z0-9])[0-9a-f]{32}-us\d{1,2}(?![A-Za-z0-9])"), needs=("-us",)),
    Detector("digitalocean_token", _tok(r"do[opr]_v1_", r"[a-f0-9]{64}"), check=_body_random, needs=("_v1_",)),
    Detector(
        "shopify_token",
        _tok(r"shp(?:at|ca|pa|ss)_", r"[a-fA-F0-9]{32}"),
        check=_body_random,
        needs=("shpat_", "shpca_", "shppa_", "shpss_"),
    ),
    Detector(
        "telegram_token", re.compile(r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])"), needs=(":AA",)
    ),
    Detector(
        "discord_token",
        re.compile(
            r"(?<![A-Za-z0-9_\-])[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}(?![A-Za-z0-9_\-])"
        ),
        check=lambda m: _classes(m.group(0)) >= 3,
        needs=(".",),
    ),
    # Headers and URLs: the credential after the scheme word, not the word itself.
    Detector(
        "basic_auth",
        re.compile(r"(?i)\bbasic\s+(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        group="v",
        check=_basic,
        needs=("basic",),
    ),
    Detector(
        "bearer_token",
        re.compile(r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9\-._~+/]{8,}=*)"),
        group="v",
        check=_bearer,
        needs=("bearer",),
    ),
    Detector(
        "bearer_token",
        re.compile(
            r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:token|apikey|api-key|key|sso-key|hmac)\s+(?P<v>[^\s\"']{8,})"
        ),
        group="v",
        check=_bearer,
        needs=("authorization",),
    ),
    Detector(
        "url_password",
        # The password runs to the LAST "@" before the host: unencoded "@" and "#" in passwords are common.
        re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://(?P<user>[^\s:/?#@\[\]\"']*):(?P<v>[^\s/?\"']+)@(?=[^\s@/?\"']+)"),
        group="v",
        check=_url_password,
        needs=("://",),
    ),
    Detector(
        "password",
        _PASSWORD_FLAG,
        group="v",
        check=lambda m: _credential_like(m.group("v"), strict=False),
        needs=("docker", "podman", "buildah", "helm", "mysql", "mariadb", "sshpass", "redis-cli", "htpasswd", "login"),
    ),
    Detector("password", _PROSE_PASSWORD, span=_prose_span, needs=("password", "passphrase", "passcode", "pwd")),
    # Last: a value after a word like password/secret/token. The kind says which word.
    Detector(
        "credential",
        _GENERIC,
        span=_generic_span,
        needs=("pass", "pwd", "secret", "token", "key", "credential", "auth", "sas", "sess", "connect.sid"),
    ),
)

#: A credential word that names a password: its finding is a "password", not a "credential".
PASSWORD_WORD = re.compile(r"(?i)(?:passw(?:or)?d|passphrase|pwd|pass)$")
