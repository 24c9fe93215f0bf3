"""Failure signatures, failure patterns, fix statistics and prevention checks (pure).

An error message mixes a *template* (what went wrong) with *details* that change
from one occurrence to the next: paths, numbers, ids, hosts, ports, timestamps,
quoted values. :func:`error_signature` masks the details so that occurrences of
one failure share a signature::

    >>> error_signature("ConnectionError: cannot reach db-7.prod.example.com:5432 after 30s")
    'ConnectionError: cannot reach <host> after <n>'

Occurrences are grouped into patterns by signature, and signatures that differ
only in wording are joined when their exception type is the same and their
meanings are close (cosine of their embeddings, computed by the caller). For each
pattern the fixes tried are counted (successes / attempts, ranked by a Beta
posterior mean) and prevention checks are written from templates.

Everything here takes values and returns values: no store, no clock, no model.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from engramdb.errors import NotFound, ValidationError
from engramdb.models import FailurePattern, SolutionStats

if TYPE_CHECKING:
    from engramdb.models import Memory

__all__ = [
    "MAX_SIGNATURE_CHARS",
    "SIMILARITY_THRESHOLD",
    "Candidate",
    "Occurrence",
    "aggregate_solutions",
    "best_match",
    "build_pattern",
    "error_signature",
    "error_text",
    "exception_type",
    "find_pattern",
    "group_occurrences",
    "headline",
    "mask",
    "occurrence_from_memory",
    "occurrence_from_metadata",
    "pattern_dict",
    "pattern_key",
    "prevention_checks",
    "signature_hash",
    "solution_dict",
    "solution_key",
    "variable_parts",
]

#: Cosine similarity of two signatures' embeddings at or above which two signatures with the same
#: exception type are one pattern. Signatures are already stripped of details, so what is left
#: is wording. Measured with MiniLM: rewordings of one failure ("cannot reach <host>" / "unable
#: to reach host <host>") score 0.97-1.0, while different failures of one exception type that
#: share most words ("connection refused" / "connection timed out", "too many" / "not enough
#: values to unpack") reach 0.94. Merging two different failures would recommend the wrong fix,
#: missing a rewording only delays learning, so the threshold sits high.
SIMILARITY_THRESHOLD: Final = 0.955

#: Signatures are cut to this many characters: enough to tell failures apart, bounded for storage.
MAX_SIGNATURE_CHARS: Final = 400

# -- masking -------------------------------------------------------------------------------------------
#
# The rules run in a deliberate order; each one replaces what it finds with a placeholder that no
# later rule can match (placeholders hold no digits, dots, slashes or quotes):
#
#   0. keep:   the exception class the message starts with ("sqlite3.OperationalError") is protected
#   1. keep:   numbers that *name* a failure (HTTP status, errno, exit code, signal, "Error 111")
#   2. url     scheme://...                       before paths and hosts, which live inside URLs
#   3. email   user@host                          before hosts
#   4. str     '...', "...", `...`                quoted values vary as a whole, whatever is inside
#   5. ts      dates and times                    before numbers, which would split them into pieces
#   6. uuid    8-4-4-4-12 hex                     before numbers and ids
#   7. addr    0x7f3a...                          memory addresses and hex literals
#   8. path    windows, UNC, posix, relative, bare file names (+ :line:col)
#   9. host    IPv4, IPv6, localhost, dotted names with a known top-level domain (+ :port), and
#              other host names by context or shape ("request to ci-runner-7", "db-3.eu-west")
#  10. n       any token containing a digit: numbers, ids, hashes ("req_7fa9b2" -> "req_<n>")
#
# Then runs of one placeholder ("<n>.<n>.<n>", "<str>, <str>") collapse into one, so lists
# and versions of any length look the same, and whitespace is normalised.

# Digits protected by rule 1 are shifted into the Unicode private use area so that no later
# rule sees a digit; they are shifted back at the end.
_SHIFT: Final = 0xE000
_PROTECT_TABLE: Final = {ord(d): _SHIFT + ord(d) for d in "0123456789"}
_RESTORE_TABLE: Final = {_SHIFT + ord(d): ord(d) for d in "0123456789"}

_KEEP = re.compile(
    r"""(?ix)
    (?:
        \[errno\s+\d+\]                                                   # [Errno 111]
      | \berrno[\s:=]+\d+
      | \bhttp(?:/\d(?:\.\d)?)?[\s:]*(?:error[\s:]*)?[1-5]\d\d\b            # HTTP 404, HTTPError: 503
      | \b[1-5]\d\d\s+(?:client|server)\s+error                           # 404 Client Error
      | \bstatus(?:[\s_]code)?[\s:=]+[1-5]\d\d\b                          # status 500, status_code=404
      | \bresponse\s+code[\s:=]+[1-5]\d\d\b
      | \bexit(?:ed)?(?:\s+with)?\s+(?:code|status)[\s:=]+-?\d+           # exit code 137
      | \bnon-zero\s+exit\s+status\s+-?\d+
      | \breturn(?:ed)?\s+code[\s:=]+-?\d+
      | \bsignal[\s:=]+\d+                                                # killed by signal 9
      | \berror(?:[\s_]code)?[\s:=#]+\d+\b                               # Error 111, error code: 1045
    )
    """
)

_URL = re.compile(r"(?i)(?<![\w])[a-z][a-z0-9+.-]*://[^\s'\"`<>]+")
_EMAIL = re.compile(r"(?i)(?<![\w.+-])[\w.+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+")
_QUOTED = re.compile(
    r"""(?x)
    (?<![\w\\])(?:[bBrRuUfF]{1,2})?
    (?: '[^'\n]*' | "[^"\n]*" | `[^`\n]*` )
    (?![\w])
    """
)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_WEEKDAY = (
    r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?|sat(?:urday)?"
    r"|sun(?:day)?)\.?,?"
)
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:\s?[ap]\.?m\.?)?"
_SECONDS_CLOCK = r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?:\s?[ap]\.?m\.?)?"
_ZONE = r"(?:\s?(?:z|utc|gmt)|\s?[+-]\d{2}:?\d{2})?"
_TS = re.compile(
    rf"""(?ix)
    (?<![\w.:/-])
    (?:
        \d{{4}}-\d{{1,2}}-\d{{1,2}}(?:[t\s_]{_CLOCK})?{_ZONE}                    # 2024-01-15T10:30:00.123Z
      | \d{{4}}/\d{{1,2}}/\d{{1,2}}(?:[\s:]{_CLOCK})?{_ZONE}                     # 2024/01/15 10:30:00
      | \d{{1,2}}[/-]\d{{1,2}}[/-]\d{{4}}(?:,?\s{_CLOCK})?{_ZONE}                # 15/01/2024 10:30
      | \d{{1,2}}/{_MONTH}/\d{{4}}(?::{_CLOCK})?{_ZONE}                           # 15/Jan/2024:10:30:00 +0000
      | (?:{_WEEKDAY}\s+)?\d{{1,2}}\s+{_MONTH}\s+\d{{4}}(?:\s+{_CLOCK})?{_ZONE}   # Mon, 15 Jan 2024 10:30:00 GMT
      | (?:{_WEEKDAY}\s+)?{_MONTH}\s+\d{{1,2}}(?:,?\s+\d{{4}})?\s+{_CLOCK}{_ZONE}(?:\s+\d{{4}})?  # Jan 15 10:30:00
      | (?:{_WEEKDAY}\s+)?{_MONTH}\s+\d{{1,2}},?\s+\d{{4}}                      # January 15, 2024
      | {_SECONDS_CLOCK}{_ZONE}                                                  # 10:30:00
    )
    (?![\w])(?!:\d)
    """
)
_UUID = re.compile(r"(?i)(?<![0-9a-z])[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}(?![0-9a-z])")
_ADDR = re.compile(r"(?i)(?<![\w])0x[0-9a-f]+\b")

_FILE_EXT = (
    r"(?:py|pyc|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|json|jsonl|ya?ml|toml|ini|cfg|conf|env|txt|csv|tsv|log|md|rst"
    r"|html?|css|xml|sql|db|sqlite3?|sh|bash|bat|ps1|exe|dll|so|dylib|jar|class|java|kt|go|rs|c|h|cpp|hpp|cc"
    r"|cs|rb|php|swift|lock|pem|crt|cer|key|p12|zip|tar|gz|tgz|bz2|xz|7z|whl|egg|parquet|pkl|pickle|npy|npz|onnx"
    r"|pt|pth|h5|bin|dat|png|jpe?g|gif|svg|webp|pdf|docx?|xlsx?|pptx?|tmp|bak|pid|sock|service)"
)
_SEG = r"[\w.@%+~$-]"
_LINECOL = r"(?::\d+){0,2}"
# Windows names may hold more characters, but not the punctuation that ends a path inside a sentence.
_WINSEG = r"""[^\s\\/:*?"'<>|,;()\[\]]"""
_PATH = re.compile(
    rf"""(?x)
    (?:
        (?<![\w])[A-Za-z]:[\\/](?:{_WINSEG}+[\\/]?)*{_LINECOL}          # C:\Users\me\file.txt
      | (?<![\w\\])\\\\{_WINSEG}+(?:\\{_WINSEG}+)+\\?            # \\server\share\dir
      | (?<![\w.:/~-])(?:~|\.{{1,2}})?/{_SEG}+(?:/{_SEG}+)*/?{_LINECOL}        # /var/log/x.log:12, ~/x, ../x
      | (?<![\w.:/~@-])\w{_SEG}*(?:/{_SEG}+){{2,}}/?{_LINECOL}                 # a/b/c (two or more slashes)
      | (?<![\w.:/~@-])\w{_SEG}*/{_SEG}*\.{_FILE_EXT}{_LINECOL}(?![\w/])       # src/app.py
      | (?<![\w.:/~@-])\w[\w.-]*\.{_FILE_EXT}{_LINECOL}(?![\w/.-])             # settings.py:42
    )
    """
)
# Top-level domains that make a dotted word a host name. Deliberately short: words that are also
# common attribute or module names (info, app, test, site, in, it, no ...) would turn Python names
# such as "logger.info" into hosts.
_TLD = (
    r"(?:com|net|org|io|dev|edu|gov|mil|co|us|uk|de|fr|nl|eu|jp|cn|ru|br|au|ca|ch|se|es|cloud|ai"
    r"|local|localdomain|internal|intranet|lan|corp|svc|example|invalid|arpa)"
)
_PORT = r"(?::\d{1,5})?"
_HOST = re.compile(
    rf"""(?ix)
    (?:
        (?<![\w.:-])(?:\d{{1,3}}\.){{3}}\d{{1,3}}{_PORT}(?!\w)(?!\.\d)               # 10.0.0.1:5432
      | (?<![\w.-])localhost{_PORT}(?![\w-])(?!\.\w)
      | (?<![\w.-])(?:[a-z0-9](?:[a-z0-9_-]{{0,61}}[a-z0-9])?\.)+{_TLD}\.?{_PORT}(?![\w-])  # db.example.com:5432
    )
    """
)
# IPv6 candidates are validated with the ipaddress module: the shape alone would match "std::io".
_IPV6 = re.compile(
    r"(?i)(?<![\w:.\[])\[?(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:%\w+)?\]?(?::\d{1,5})?(?![\w])(?!:[\w:])"
)
# Host names without a known top-level domain ("ci-runner-7", "db-3.eu-west") are told from words
# by what surrounds them or by their shape, and only when they hold a digit, a hyphen or a dot
# (so "connect to the database" keeps its words):
#   - after a word that introduces a host ("host", "server", "node", "connecting to", "request to" ...),
#     when it holds a hyphen or a dot
#   - followed by a port ("ci-runner-7:443")
#   - dotted with a hyphen in a label ("db-replica-3.eu-west"): no Python or Java name has one
_HOSTNAME = r"[A-Za-z][\w-]*(?:\.[\w-]+)*"
_HOST_CONTEXT = re.compile(
    rf"""(?ix)
    (\b(?:host(?:name)?|server|node|worker|instance|machine|peer|endpoint|replica
        |(?:connect(?:ing|ion|ed)?|requests?|sen[dt]|sending|proxy(?:ing)?|upstream)\s+to
        |reach(?:ing)?|resolv(?:e|ing)|lookup\s+(?:for|of))\s+)
    ({_HOSTNAME}{_PORT})(?![\w.-])
    """
)
_HOST_SHAPE = re.compile(
    rf"(?<![\w.-])(?:{_HOSTNAME}:\d{{1,5}}(?![\w.])|[A-Za-z][\w-]*(?:\.[\w-]+)+{_PORT}(?![\w-])(?!\.\w))"
)


def _looks_like_host(name: str) -> bool:
    return any(c.isdigit() or c in "-." for c in name.split(":", 1)[0])


def _host_context(match: re.Match[str]) -> str:
    # A hyphen or a dot, not just a digit: "server a3f9c1" is more likely an id (masked as <n>).
    name = match.group(2).split(":", 1)[0]
    return match.group(1) + "<host>" if "-" in name or "." in name else match.group(0)


def _host_shape(match: re.Match[str]) -> str:
    text = match.group(0)
    name, _, port = text.partition(":")
    labels = name.split(".")
    if port:  # name:port
        return "<host>" if _looks_like_host(name) else text
    return "<host>" if any("-" in label for label in labels) and all(labels) else text


# Any token holding a digit is a detail: counts, sizes, ports, line numbers, numeric and hex ids,
# hashes. Tokens end at anything that is not a letter or digit, so "req_7fa9b2" keeps its "req_".
_DIGIT_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:(?<![\w)\]-])[-+])?[A-Za-z0-9]*\d[A-Za-z0-9]*(?![A-Za-z0-9])")
_RUN = re.compile(r"<(\w+)>(?:(?:[.:,;/_+-]|\s*[,;|]\s*|\s+)<\1>)+")
_SPACE = re.compile(r"\s+")

_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
_TYPE = re.compile(
    r"^\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Timeout|Fault))\b\s*(?::|$)"
)


def _protect(match: re.Match[str]) -> str:
    return match.group(0).translate(_PROTECT_TABLE)


def _protect_type(text: str) -> str:
    # The exception class a message starts with is never a detail ("sqlite3.OperationalError").
    match = _TYPE.match(text)
    if match is None:
        return text
    return text[: match.start(1)] + match.group(1).translate(_PROTECT_TABLE) + text[match.end(1) :]


def _url(match: re.Match[str]) -> str:
    # Sentence punctuation right after a URL is not part of it.
    text = match.group(0)
    stripped = text.rstrip(".,;:!?)]}")
    return "<url>" + text[len(stripped) :]


def _ipv6(match: re.Match[str]) -> str:
    text = match.group(0)
    tail = ""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return text
        core = text[1:close]
    elif text.endswith("]"):
        return text
    elif text.endswith(":") and not text.endswith("::"):
        # "fe80::1: refused": the colon belongs to the sentence.
        core, tail = text[:-1], ":"
    else:
        core = text
    if not text.startswith("[") and not any(c.isdigit() for c in core):
        return text  # "a::b" is more likely a C++ or Rust name than an address
    try:
        ipaddress.IPv6Address(core.split("%", 1)[0])
    except ValueError:
        return text
    return "<host>" + tail


Replacement = str | Callable[[re.Match[str]], str]

_PLACEHOLDERS: Final = ("n", "str", "ts", "url", "path", "host", "uuid", "addr", "email")
# No rule starts a match right after a placeholder: what a placeholder replaced was a detail's
# last character, so masking a signature again changes nothing (a signature is a fixed point).
_AFTER_PLACEHOLDER: Final = "".join(f"(?<!<{name}>)" for name in _PLACEHOLDERS)
_INLINE_FLAGS = re.compile(r"^\(\?[a-zA-Z]+\)")


def _guarded(pattern: re.Pattern[str]) -> re.Pattern[str]:
    source = pattern.pattern
    flags = _INLINE_FLAGS.match(source)
    head = flags.group(0) if flags else ""
    return re.compile(head + _AFTER_PLACEHOLDER + source[len(head) :], pattern.flags)


#: (placeholder name, pattern, replacement), applied in this order.
_RULE_LIST: Final[tuple[tuple[str, re.Pattern[str], Replacement], ...]] = (
    ("url", _URL, _url),
    ("email", _EMAIL, "<email>"),
    ("str", _QUOTED, "<str>"),
    ("ts", _TS, "<ts>"),
    ("uuid", _UUID, "<uuid>"),
    ("addr", _ADDR, "<addr>"),
    ("path", _PATH, "<path>"),
    ("host", _IPV6, _ipv6),
    ("host", _HOST, "<host>"),
    ("host", _HOST_CONTEXT, _host_context),
    ("host", _HOST_SHAPE, _host_shape),
    ("n", _DIGIT_TOKEN, "<n>"),
)
_RULES: Final = tuple((name, _guarded(pattern), replacement) for name, pattern, replacement in _RULE_LIST)


def headline(message: str) -> str:
    """The line of an error report that says what went wrong.

    For a Python traceback that is its last exception line (the frames above it
    change with every refactoring); otherwise the whole message.
    """
    if _TRACEBACK.search(message):
        lines = [line for line in message.splitlines() if line.strip()]
        for line in reversed(lines):
            if not line.startswith((" ", "\t")) and not _TRACEBACK.match(line):
                return line.strip()
    return message.strip()


def mask(text: str) -> str:
    """``text`` with every variable detail replaced by a typed placeholder (no headline selection)."""
    out = _protect_type(text)
    out = _KEEP.sub(_protect, out)
    for _name, pattern, replacement in _RULES:
        out = pattern.sub(replacement, out)
    out = _RUN.sub(r"<\1>", out)
    out = _SPACE.sub(" ", out).strip()
    return out.translate(_RESTORE_TABLE)


def error_signature(message: str) -> str:
    """The signature of an error message: its template, with variable details masked.

    Two messages that differ only in paths, numbers, ids, hex values, hosts, IP
    addresses, ports, URLs, e-mail addresses, timestamps, quoted values, memory
    addresses or line numbers have the same signature. Numbers that name the
    failure itself (HTTP status, errno, exit code, signal) are kept.
    """
    signature = mask(headline(message))
    if len(signature) > MAX_SIGNATURE_CHARS:
        signature = signature[: MAX_SIGNATURE_CHARS - 1].rstrip() + "…"
    return signature


def variable_parts(message: str) -> dict[str, list[str]]:
    """The details :func:`error_signature` masks in ``message``, by placeholder name, in order.

    Prevention checks use them to name an example ("the host (e.g. db-7.example.com:5432)").
    """
    found: dict[str, list[str]] = {}
    text = _KEEP.sub(_protect, _protect_type(headline(message)))
    for name, pattern, replacement in _RULES:

        def collect(match: re.Match[str], name: str = name, replacement: Replacement = replacement) -> str:
            out = replacement if isinstance(replacement, str) else replacement(match)
            if out != match.group(0):
                # A rule that matches context around the detail captures the detail last.
                value = match.group(match.lastindex or 0) if match.re.groups >= 2 else match.group(0)
                found.setdefault(name, []).append(value.translate(_RESTORE_TABLE))
            return out

        text = pattern.sub(collect, text)
    return found


def exception_type(message: str) -> str | None:
    """The exception class a message starts with (``ConnectionError``), last dotted part; None if none."""
    match = _TYPE.match(headline(message))
    if match is None:
        return None
    return match.group(1).rsplit(".", 1)[-1]


def error_text(error: BaseException | str) -> str:
    """An error as one message: ``"Type: message"`` for an exception, the text itself for a string."""
    if isinstance(error, BaseException):
        name = type(error).__name__
        detail = str(error).strip()
        if isinstance(error, KeyError) and len(error.args) == 1:
            detail = repr(error.args[0])
        return f"{name}: {detail}" if detail else name
    return error


def pattern_key(agent: str, signature: str) -> str:
    """A stable id for the pattern first seen as ``signature`` by ``agent`` (16 hex characters)."""
    return hashlib.sha256(f"{agent}\x00{signature}".encode()).hexdigest()[:16]


def signature_hash(signature: str) -> str:
    """A short stable hash of a signature (used as an indexed tag)."""
    return hashlib.sha256(signature.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=4096)
def solution_key(solution: str) -> str:
    """What makes two fixes the same fix: the same text once details are masked, case folded.

    "raise the timeout to 30s" and "raise the timeout to 60s" are one fix whose details vary.
    """
    return mask(solution).casefold()


# -- grouping ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Occurrence:
    """One recorded failure, as the pattern logic needs it."""

    id: str
    message: str
    signature: str
    #: The pattern this occurrence was assigned to when it was recorded.
    key: str
    error_type: str | None
    at: datetime
    solution: str | None = None
    failed_solutions: tuple[str, ...] = ()
    context: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A past signature considered for joining: its pattern key, type, and similarity to the new one."""

    key: str
    signature: str
    error_type: str | None
    similarity: float


def best_match(
    signature: str,
    error_type: str | None,
    candidates: Iterable[Candidate],
    *,
    threshold: float = SIMILARITY_THRESHOLD,
) -> Candidate | None:
    """The candidate a new signature belongs with: an identical signature, else the most similar one
    of the same exception type at or above ``threshold``; None if there is none.
    """
    best: Candidate | None = None
    for cand in candidates:
        if cand.signature == signature:
            return cand
        if cand.error_type != error_type or cand.similarity < threshold:
            continue
        if best is None or (cand.similarity, cand.key) > (best.similarity, best.key):
            best = cand
    return best


class _Union:
    """Union-find over strings (pattern keys and signatures)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent.setdefault(x, x)
        if parent != x:
            root = self.find(parent)
            self.parent[x] = root
            return root
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def group_occurrences(occurrences: Iterable[Occurrence]) -> list[list[Occurrence]]:
    """Occurrences grouped into patterns, each group oldest first, groups by first occurrence.

    Two occurrences are in one pattern when they share a signature or a pattern key
    (transitively): keys join reworded signatures decided at write time, signatures
    join occurrences recorded by different agents (whose keys differ) and shared.
    """
    items = sorted(occurrences, key=lambda o: (o.at, o.id))
    uf = _Union()
    for o in items:
        uf.union("k:" + o.key, "s:" + o.signature)
    groups: dict[str, list[Occurrence]] = {}
    for o in items:
        groups.setdefault(uf.find("k:" + o.key), []).append(o)
    return list(groups.values())


# -- fixes -----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tally:
    successes: int = 0
    attempts: int = 0
    last_success_text: str | None = None
    last_text: str = ""
    last_at: datetime | None = None
    texts: dict[str, int] = field(default_factory=dict)


def _clean(solution: str) -> str:
    return _SPACE.sub(" ", solution).strip()


def aggregate_solutions(occurrences: Iterable[Occurrence]) -> list[SolutionStats]:
    """The fixes tried for these occurrences, best first.

    ``successes`` counts occurrences where the fix was the one that worked,
    ``attempts`` those where it was tried (worked or failed). The ranking uses the
    posterior mean of a Beta(1, 1) prior, (s + 1) / (a + 2), so one success is
    not certainty and a fix that failed ranks below one never contradicted; ties go to
    more evidence, then to the more recent fix. A fix is shown as its most recent
    working wording.
    """
    tallies: dict[str, _Tally] = {}
    for o in sorted(occurrences, key=lambda o: (o.at, o.id)):
        tried: list[tuple[str, bool]] = [(s, False) for s in o.failed_solutions]
        if o.solution:
            tried.append((o.solution, True))
        seen: set[str] = set()
        for raw, worked in tried:
            text = _clean(raw)
            if not text:
                continue
            key = solution_key(text)
            if key in seen and not worked:
                continue  # the same fix listed twice in one occurrence is one attempt
            seen.add(key)
            t = tallies.setdefault(key, _Tally())
            t.attempts += 1
            t.last_text = text
            t.last_at = o.at
            if worked:
                t.successes += 1
                t.last_success_text = text
    ranked = sorted(
        tallies.values(),
        key=lambda t: (
            -(t.successes + 1) / (t.attempts + 2),
            -t.attempts,
            -(t.last_at.timestamp() if t.last_at else 0),
        ),
    )
    return [
        SolutionStats(
            solution=t.last_success_text or t.last_text,
            successes=float(t.successes),
            attempts=float(t.attempts),
            success_rate=(t.successes + 1.0) / (t.attempts + 2.0),
        )
        for t in ranked
    ]


# -- prevention --------------------------------------------------------------------------------------------

# (words that identify the kind of failure, the check to run before acting). The first that matches wins.
_CHECKS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(r"(?i)timed?\s*out|timeout|deadline exceeded"),
        "Before calling {resource}, set an explicit timeout and retry with backoff; check its latency first",
    ),
    (
        re.compile(
            r"(?i)connection (?:refused|reset|aborted|error)|unreachable|could not connect|cannot connect"
            r"|can't connect|failed to connect|no route to host|name or service not known|name resolution"
            r"|getaddrinfo|dns|econnrefused|econnreset|broken pipe|<host>|<url>"
        ),
        "Before connecting to {resource}, check that it is reachable (a health check or a ping)",
    ),
    (
        re.compile(r"(?i)\b(?:429|rate.?limit|too many requests|quota|throttl)"),
        "Before sending requests to {resource}, throttle them and respect the rate limit (honour Retry-After)",
    ),
    (
        re.compile(
            r"(?i)\b(?:401|403)\b|unauthori[sz]ed|forbidden|authenticat|credential|token (?:has )?expired"
            r"|invalid token|access denied|api key"
        ),
        "Before calling {resource}, check that the credentials are present and not expired",
    ),
    (
        re.compile(r"(?i)permission denied|not permitted|eacces|eperm|read-only file system"),
        "Before writing to {resource}, check the permissions of the account that runs the task",
    ),
    (
        re.compile(r"(?i)no such file|not found|does not exist|doesn't exist|enoent|missing|filenotfound"),
        "Before using {resource}, check that it exists",
    ),
    (
        re.compile(r"(?i)no space left|disk (?:is )?full|enospc|quota exceeded"),
        "Before writing, check the free disk space",
    ),
    (
        re.compile(r"(?i)out of memory|memoryerror|cannot allocate|oom|killed"),
        "Before running, check the memory limit and the size of the input",
    ),
    (
        re.compile(r"(?i)no module named|modulenotfound|importerror|cannot import|package .* not installed"),
        "Before running, check that the required packages are installed in this environment",
    ),
    (
        re.compile(r"(?i)keyerror|missing (?:required )?(?:key|field|argument)|required (?:field|property)"),
        "Before processing the input, validate that it has every required field",
    ),
    (
        re.compile(r"(?i)nonetype|null ?pointer|undefined is not|cannot read propert|is none|of none"),
        "Before using a value that may be missing, check that it is not None",
    ),
    (
        re.compile(r"(?i)json|decode|parse|unexpected token|invalid literal|malformed|syntax"),
        "Before parsing the input, check its format (and log a sample of it)",
    ),
    (
        re.compile(r"(?i)lock|deadlock|busy|in use|conflict|already exists|\b409\b"),
        "Before writing, check that no other process holds {resource} (or make the step idempotent)",
    ),
    (
        re.compile(r"(?i)\b5\d\d\b|internal server error|bad gateway|service unavailable"),
        "Before depending on {resource}, check its status; retry server errors with backoff",
    ),
)

_RESOURCE_ORDER: Final = ("url", "host", "path", "email", "str")


def _resource(example: str) -> str:
    parts = variable_parts(example)
    for name in _RESOURCE_ORDER:
        values = parts.get(name)
        if values:
            value = values[0]
            label = {"url": "the service", "host": "the host", "path": "the file", "email": "the account"}.get(
                name, "the resource"
            )
            return f"{label} (e.g. {value})"
    return "the resource it needs"


def prevention_checks(
    *,
    signature: str,
    example: str,
    occurrences: int,
    solutions: Sequence[SolutionStats],
    last_seen: datetime,
) -> list[str]:
    """Checks to run before acting, written from the pattern and its fixes by templates (deterministic).

    The first line is the check that fits the kind of failure (or a generic watch
    item), then one line for the fix to try first and one per fix that kept failing.
    """
    history = f"{occurrences} time{'s' if occurrences != 1 else ''}, last {last_seen.date().isoformat()}"
    text = f"{signature}\n{example}"
    template = next((t for words, t in _CHECKS if words.search(text)), None)
    if template is not None:
        first = f"{template.format(resource=_resource(example))}. Seen {history}: {signature}"
    else:
        first = f"Watch for this failure, seen {history}: {signature}"
    checks = [first]
    working = [s for s in solutions if s.successes > 0]
    if working:
        best = working[0]
        checks.append(
            f"If it happens, first try: {best.solution} (worked {best.successes:g} of {best.attempts:g} times)."
        )
        if best.successes >= 2 and best.successes / max(best.attempts, 1.0) >= 0.5:
            checks.append(f"Consider applying it up front: {best.solution}.")
    for s in solutions:
        if s.successes == 0 and s.attempts >= 2:
            checks.append(f"Avoid: {s.solution} (failed all {s.attempts:g} times it was tried).")
    return checks


def build_pattern(
    occurrences: Sequence[Occurrence],
    *,
    solutions_limit: int | None = None,
) -> FailurePattern:
    """A :class:`~engramdb.models.FailurePattern` from one group of :func:`group_occurrences` (oldest first)."""
    first, last = occurrences[0], occurrences[-1]
    solutions = aggregate_solutions(occurrences)
    if solutions_limit is not None:
        solutions = solutions[:solutions_limit]
    # The most common signature names the pattern; ties go to the first one seen.
    counts: dict[str, int] = {}
    for o in occurrences:
        counts[o.signature] = counts.get(o.signature, 0) + 1
    signature = max(counts, key=lambda s: (counts[s], -_first_index(occurrences, s)))
    return FailurePattern(
        id=first.key,
        signature=signature,
        example=last.message,
        occurrences=len(occurrences),
        first_seen=first.at,
        last_seen=last.at,
        solutions=solutions,
        prevention=prevention_checks(
            signature=signature,
            example=last.message,
            occurrences=len(occurrences),
            solutions=solutions,
            last_seen=last.at,
        ),
    )


def _first_index(occurrences: Sequence[Occurrence], signature: str) -> int:
    for i, o in enumerate(occurrences):
        if o.signature == signature:
            return i
    return len(occurrences)


def occurrence_from_metadata(
    *, memory_id: str, content: str, metadata: Mapping[str, object], created_at: datetime, agent: str
) -> Occurrence:
    """An :class:`Occurrence` from a stored ``failure`` memory; tolerates memories written by hand.

    A ``failure`` memory that ``record_failure`` did not write (no signature in its
    metadata) is read as an error message of its own.
    """
    message = metadata.get("error")
    if not isinstance(message, str) or not message.strip():
        message = content
    signature = metadata.get("signature")
    if not isinstance(signature, str) or not signature:
        signature = error_signature(message)
    key = metadata.get("pattern")
    if not isinstance(key, str) or not key:
        key = pattern_key(agent, signature)
    etype = metadata.get("error_type")
    solution = metadata.get("solution")
    failed = metadata.get("failed_solutions")
    context = metadata.get("context")
    return Occurrence(
        id=memory_id,
        message=message,
        signature=signature,
        key=key,
        error_type=etype if isinstance(etype, str) else exception_type(message),
        at=created_at,
        solution=solution if isinstance(solution, str) and solution.strip() else None,
        failed_solutions=tuple(s for s in failed if isinstance(s, str)) if isinstance(failed, list) else (),
        context=context if isinstance(context, str) else "",
    )


def occurrence_from_memory(memory: Memory) -> Occurrence:
    """:func:`occurrence_from_metadata` of a stored ``failure`` memory."""
    return occurrence_from_metadata(
        memory_id=memory.id,
        content=memory.content,
        metadata=memory.metadata,
        created_at=memory.created_at,
        agent=memory.agent,
    )


def find_pattern(
    groups: Sequence[list[Occurrence]], pattern_id: str, *, agent: str, not_found_note: str = ""
) -> list[Occurrence]:
    """The group (from :func:`group_occurrences`) that ``pattern_id`` names, as ``agent`` sees the patterns.

    A pattern is named after its first occurrence's key; occurrences that joined it later
    (reworded, or recorded by another agent and shared) keep theirs, so any key names it.
    A unique prefix of at least 4 characters names it too. Raises ValidationError when the
    id is ambiguous, NotFound (its message ending with ``not_found_note``) when it names none.
    """
    found = [g for g in groups if any(o.key == pattern_id for o in g)]
    if not found and len(pattern_id) >= 4:
        found = [g for g in groups if any(o.key.startswith(pattern_id) for o in g)]
    if len(found) > 1:
        raise ValidationError(f"pattern id {pattern_id!r} is ambiguous: give more characters")
    if not found:
        raise NotFound(f"no failure pattern {pattern_id!r} visible to agent {agent!r}{not_found_note}")
    return found[0]


def pattern_dict(p: FailurePattern) -> dict[str, Any]:
    """A :class:`~engramdb.models.FailurePattern` as a JSON-ready dict."""
    return {
        "id": p.id,
        "signature": p.signature,
        "example": p.example,
        "occurrences": p.occurrences,
        "first_seen": p.first_seen.isoformat(),
        "last_seen": p.last_seen.isoformat(),
        "solutions": [solution_dict(s) for s in p.solutions],
        "prevention": list(p.prevention),
    }


def solution_dict(s: SolutionStats) -> dict[str, Any]:
    """A :class:`~engramdb.models.SolutionStats` as a JSON-ready dict."""
    return {"solution": s.solution, "successes": s.successes, "attempts": s.attempts, "success_rate": s.success_rate}
