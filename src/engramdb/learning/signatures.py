"""Failure signatures: an error message with its variable details masked (pure).

An error message mixes a *template* (what went wrong) with *details* that change
from one occurrence to the next: paths, numbers, ids, hosts, ports, timestamps,
quoted values. :func:`error_signature` masks the details so that occurrences of
one failure share a signature::

    >>> error_signature("ConnectionError: cannot reach db-7.prod.example.com:5432 after 30s")
    'ConnectionError: cannot reach <host> after <n>'

:mod:`engramdb.learning.failures` groups occurrences into patterns by signature.
Everything here takes values and returns values: no store, no clock, no model.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "GENERIC_FIX_KEY",
    "MAX_SIGNATURE_CHARS",
    "decisive_template",
    "error_signature",
    "error_text",
    "exception_type",
    "headline",
    "mask",
    "pattern_key",
    "signature_hash",
    "solution_key",
    "variable_parts",
]

#: Signatures are cut to this many characters: enough to tell failures apart, bounded for storage.
MAX_SIGNATURE_CHARS: Final = 400
#: Metadata key of a failure whose fix holds whatever module or package its message names (a pack's generic fix).
GENERIC_FIX_KEY: Final = "generic"

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


# A bare name of a service, container, job... ("in the billing container", "service orders") is a
# detail like a quoted one: the name varies, the failure does not.
_NAME_STOP = (
    r"(?:the|a|an|this|that|its|their|our|your|same|local|remote|main|default|new|old|current|whole|entire"
    r"|other|is|was|were|are|has|had|not|no|and|or|but|to|of|in|on|at|for|with|from|by|failed|failing|did"
    r"|does|do|cannot|can't|could|would|will|may|might|be|been|being|which|that|it|running|started|stopped"
    r"|process|instance|itself|name|named|image|base|http|https|api|web|database|db|service|container|pod)"
)
_NAMED = re.compile(
    rf"""(?ix)
    (?:
        (\bthe\s+)(?!{_NAME_STOP}\b)([a-z][\w-]*)(?=\s+(?:container|service|pod|deployment|job|worker|queue
            |bucket|cluster|namespace|microservice|daemon|stack)\b)
      | (\b(?:container|service|pod|deployment|namespace|microservice|daemon)\s+)(?!{_NAME_STOP}\b)
            ([a-z][\w-]*)(?=\s+(?:is|was|has|failed|crashed|exited|stopped|did|does|not|cannot|can't|could)\b|[,;:)]|$)
    )
    """
)


def _named(match: re.Match[str]) -> str:
    prefix = match.group(1) if match.group(1) is not None else match.group(3)
    return prefix + "<name>"


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


# Values that decide the fix are kept: the module, package or command a message names ("No module named
# 'yaml'" is fixed by installing pyyaml, "'fastapi'" by installing fastapi), and the environment variable
# it misses. They are shifted into a private-use plane (no rule matches there) and shifted back at the end.
_DECISIVE = re.compile(
    r"""(?ix)
    (?: \bno\s+module\s+named\s+
      | \bcannot\s+import\s+name\s+\S+\s+from\s+
      | \bcommand\s+not\s+found:\s*
      | \bexecutable\s+file\s+not\s+found\s+in\s+\$?path:\s*
      | \bno\s+matching\s+distribution\s+found\s+for\s+
      | \bsatisfies\s+the\s+requirement\s+
      | \b(?:package|module|library|command|program|binary|executable)\s+(?=['"`])
      | \benvironment\s+variable\s+
    )
    ( '[^'\s]{1,100}' | "[^"\s]{1,100}" | `[^`\s]{1,100}` | [A-Za-z_][\w.+-]{0,99} )
    |
    (?<![\w'"`])([A-Za-z_][\w.+-]{0,99}):\s+(?:command\s+)?not\s+found\b          # sh: yarn: not found
    |
    (['"]?)([A-Za-z_][\w.+-]{0,99})\3\s+is\s+not\s+recognized\s+as\s+an\s+internal   # Windows
    """
)
_KEPT_SHIFT: Final = 0xF0000


def _keep_value(text: str) -> str:
    return "".join(chr(_KEPT_SHIFT + ord(c)) if ord(c) < 0x10000 and not c.isspace() else c for c in text)


def _restore_kept(text: str) -> str:
    return "".join(chr(ord(c) - _KEPT_SHIFT) if _KEPT_SHIFT <= ord(c) < _KEPT_SHIFT + 0x10000 else c for c in text)


def _decisive(match: re.Match[str]) -> str:
    text = match.group(0)
    for group in (1, 2, 4):
        if match.group(group):
            start, end = match.span(group)
            base = match.start(0)
            return text[: start - base] + _keep_value(match.group(group)) + text[end - base :]
    return text


def _protect_decisive(text: str) -> str:
    return _DECISIVE.sub(_decisive, text)


def _decisive_value(match: re.Match[str]) -> tuple[str, str] | None:
    """The decisive value a ``_DECISIVE`` match keeps and the text with it replaced by ``<value>``."""
    for group in (1, 2, 4):
        if match.group(group):
            start, end = match.span(group)
            base = match.start(0)
            text = match.group(0)
            return match.group(group).strip("'\"`"), text[: start - base] + "<value>" + text[end - base :]
    return None


def decisive_template(message: str) -> tuple[str, tuple[str, ...]]:
    """The signature of ``message`` with its decisive values (see ``_DECISIVE``) as ``<value>``, and those values.

    "No module named 'numpy'" and "No module named 'fastapi'" have different signatures (the name
    decides the fix) but one template, ``No module named <value>``: a fix recorded for one is not a
    fix for the other, unless it is generic. A message without a decisive value has its signature
    as template and no values. The exception class a message starts with is left out of the template:
    ``str(e)`` of a ModuleNotFoundError is the bare "No module named 'numpy'", and a Python 2
    "ImportError: No module named numpy" is the same failure with the same fixes.
    """
    values: list[str] = []
    line = headline(message)
    typed = _TYPE.match(line)
    if typed is not None and line[typed.end() :].strip():
        line = line[typed.end() :].strip()

    def swap(match: re.Match[str]) -> str:
        found = _decisive_value(match)
        if found is None:
            return match.group(0)
        values.append(found[0])
        return found[1].replace("<value>", _keep_value("<value>"))

    text = _DECISIVE.sub(swap, _protect_type(line))
    return _cut(_masked(text)), tuple(values)


# A qualified exception class anywhere in a message names the failure, not a detail: the digits of
# "(psycopg2.OperationalError)" belong to a module name, and "java.io" in "java.io.IOException" is no host.
_QUALIFIED_TYPE = re.compile(
    r"(?<![\w.])(?:[A-Za-z_]\w*\.)+[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Timeout|Fault|Violation)\b"
)


def _protect_type(text: str) -> str:
    # The exception class a message starts with is never a detail ("sqlite3.OperationalError").
    match = _TYPE.match(text)
    if match is not None:
        text = text[: match.start(1)] + match.group(1).translate(_PROTECT_TABLE) + text[match.end(1) :]
    return _QUALIFIED_TYPE.sub(lambda m: _keep_value(m.group(0)), text)


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

_PLACEHOLDERS: Final = ("n", "str", "ts", "url", "path", "host", "uuid", "addr", "email", "name")
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
    ("name", _NAMED, _named),
    ("n", _DIGIT_TOKEN, "<n>"),
)
_RULES: Final = tuple((name, _guarded(pattern), replacement) for name, pattern, replacement in _RULE_LIST)


# A stack frame of Java, Kotlin, C# or JavaScript ("\tat com.example.App.main(App.java:10)"), or the
# "... 12 more" that stands for the frames a Java cause shares with its parent.
_FRAME = re.compile(r"^[ \t]+(?:at[ \t]+\S.*|\.\.\.[ \t]*\d+[ \t]+more)[ \t]*$", re.MULTILINE)


def headline(message: str) -> str:
    """The line of an error report that says what went wrong.

    For a Python traceback that is its last exception line (the frames above it
    change with every refactoring); for a Java or JavaScript stack trace the message
    without its ``at ...`` frames (so the same exception thrown from another place is
    the same failure); otherwise the whole message.
    """
    if _TRACEBACK.search(message):
        lines = [line for line in message.splitlines() if line.strip()]
        for line in reversed(lines):
            if not line.startswith((" ", "\t")) and not _TRACEBACK.match(line):
                return line.strip()
    if "\n" in message and _FRAME.search(message):
        return "\n".join(line for line in _FRAME.sub("", message).splitlines() if line.strip()).strip()
    return message.strip()


def mask(text: str) -> str:
    """``text`` with every variable detail replaced by a typed placeholder (no headline selection)."""
    return _masked(_protect_decisive(_protect_type(text)))


def _masked(out: str) -> str:
    """:func:`mask` of a text whose protected parts are already shifted out of the rules' reach."""
    out = _KEEP.sub(_protect, out)
    for _name, pattern, replacement in _RULES:
        out = pattern.sub(replacement, out)
    out = _RUN.sub(r"<\1>", out)
    out = _SPACE.sub(" ", out).strip()
    return _restore_kept(out.translate(_RESTORE_TABLE))


def error_signature(message: str) -> str:
    """The signature of an error message: its template, with variable details masked.

    Two messages that differ only in paths, numbers, ids, hex values, hosts, IP
    addresses, ports, URLs, e-mail addresses, timestamps, quoted values, memory
    addresses or line numbers have the same signature. Numbers that name the
    failure itself (HTTP status, errno, exit code, signal) are kept.
    """
    return _cut(mask(headline(message)))


def _cut(signature: str) -> str:
    if len(signature) > MAX_SIGNATURE_CHARS:
        signature = signature[: MAX_SIGNATURE_CHARS - 1].rstrip() + "…"
    return signature


def variable_parts(message: str) -> dict[str, list[str]]:
    """The details :func:`error_signature` masks in ``message``, by placeholder name, in order.

    Prevention checks use them to name an example ("the host (e.g. db-7.example.com:5432)").
    """
    found: dict[str, list[str]] = {}
    text = _KEEP.sub(_protect, _protect_decisive(_protect_type(headline(message))))
    for name, pattern, replacement in _RULES:

        def collect(match: re.Match[str], name: str = name, replacement: Replacement = replacement) -> str:
            out = replacement if isinstance(replacement, str) else replacement(match)
            if out != match.group(0):
                # A rule that matches context around the detail captures the detail last.
                value = match.group(match.lastindex or 0) if match.re.groups >= 2 else match.group(0)
                found.setdefault(name, []).append(value.translate(_RESTORE_TABLE))
            return out

        text = pattern.sub(collect, text)
    for match in _DECISIVE.finditer(_restore_kept(headline(message))):
        value = next((match.group(g) for g in (1, 2, 4) if match.group(g)), None)
        if value:
            found.setdefault("kept", []).append(value.strip("'\"`"))
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
