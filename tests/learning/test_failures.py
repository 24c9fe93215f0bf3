"""Failure signatures, grouping, fix statistics and prevention (pure functions)."""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.learning.failures import (
    Candidate,
    Occurrence,
    aggregate_solutions,
    best_match,
    build_pattern,
    group_occurrences,
    pattern_slug,
    prevention_checks,
)
from engramdb.learning.signatures import (
    error_signature,
    error_text,
    exception_type,
    headline,
    pattern_key,
    solution_key,
    variable_parts,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

# -- value generators, one per kind of detail ---------------------------------------------------------

_seg = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12).filter(
    lambda s: not s.startswith("-")
)
_ext = st.sampled_from(["py", "log", "csv", "json", "txt", "yaml", "db", "tar.gz", "so"])


@st.composite
def posix_paths(draw: st.DrawFn) -> str:
    segs = draw(st.lists(_seg, min_size=1, max_size=5))
    prefix = draw(st.sampled_from(["/", "~/", "./", "../"]))
    path = prefix + "/".join(segs)
    if draw(st.booleans()):
        path += "." + draw(_ext)
    if draw(st.booleans()):
        path += f":{draw(st.integers(1, 9999))}"
    return path


@st.composite
def windows_paths(draw: st.DrawFn) -> str:
    drive = draw(st.sampled_from("CDEZ"))
    segs = draw(st.lists(_seg, min_size=1, max_size=4))
    sep = draw(st.sampled_from(["\\", "/"]))
    return f"{drive}:{sep}" + sep.join(segs) + draw(st.sampled_from(["", ".txt", ".exe", ".dll"]))


@st.composite
def relative_files(draw: st.DrawFn) -> str:
    segs = draw(st.lists(_seg.filter(lambda s: s[0].isalnum()), min_size=1, max_size=3))
    return "/".join(segs) + "." + draw(_ext)


_paths = st.one_of(posix_paths(), windows_paths(), relative_files())

_numbers = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False).map(lambda f: f"{f:.3f}"),
    st.integers(0, 10**6).map(lambda n: f"{n:,}"),
    st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 999)).map(lambda t: "{}.{}.{}".format(*t)),
)

_hex = st.text("0123456789abcdef", min_size=7, max_size=40).filter(lambda s: any(c.isdigit() for c in s))


@st.composite
def uuids(draw: st.DrawFn) -> str:
    h = draw(st.text("0123456789abcdef", min_size=32, max_size=32))
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def prefixed_ids(prefix: str) -> st.SearchStrategy[str]:
    body = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=16)
    return st.tuples(body, st.sampled_from(string.digits)).map(lambda t: prefix + t[0] + t[1])


# One id *format* per template slot: a system that names jobs by uuid (or "req_...") always does.
_id_formats = st.one_of(
    st.sampled_from([uuids(), _hex.filter(lambda s: len(s) != 32), st.integers(0, 10**9).map(str)]),
    st.sampled_from(["req_", "job-", "user_", "i-", "ord#"]).map(prefixed_ids),
)

_label = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=10)
_tld = st.sampled_from(["com", "net", "org", "io", "internal", "local", "dev", "cluster.local"])
_port = st.integers(1, 65535)


@st.composite
def hosts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["ipv4", "name", "localhost", "ipv6"]))
    if kind == "ipv4":
        host = ".".join(str(draw(st.integers(0, 255))) for _ in range(4))
    elif kind == "name":
        labels = draw(st.lists(_label, min_size=1, max_size=3))
        host = ".".join(labels) + "." + draw(_tld)
    elif kind == "localhost":
        host = "localhost"
    else:
        groups = [f"{draw(st.integers(0, 0xFFFF)):x}" for _ in range(draw(st.integers(2, 6)))]
        host = "[" + ":".join(groups[:1]) + "::" + ":".join(groups[1:]) + "]"
        return host + (f":{draw(_port)}" if draw(st.booleans()) else "")
    if draw(st.booleans()):
        host += f":{draw(_port)}"
    return host


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "postgresql", "redis", "s3"]))
    path = "/".join(draw(st.lists(_seg, max_size=3)))
    query = f"?id={draw(st.integers(0, 999))}" if draw(st.booleans()) else ""
    return f"{scheme}://{draw(hosts())}/{path}{query}"


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    ts = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 40 * 365 * 86400)))
    fmt = draw(
        st.sampled_from(
            [
                "%Y-%m-%dT%H:%M:%S",
                "%Y-%m-%dT%H:%M:%SZ",
                "%Y-%m-%d %H:%M:%S",
                "%Y-%m-%dT%H:%M:%S.%f",
                "%Y-%m-%dT%H:%M:%S+00:00",
                "%Y-%m-%d",
                "%Y/%m/%d %H:%M:%S",
                "%d/%b/%Y:%H:%M:%S +0000",
                "%a, %d %b %Y %H:%M:%S GMT",
                "%b %d %H:%M:%S",
                "%H:%M:%S",
            ]
        )
    )
    return ts.strftime(fmt)


_quoted_body = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="'\"`\n\r\\"), max_size=30)


@st.composite
def quoted(draw: st.DrawFn) -> str:
    q = draw(st.sampled_from(["'", '"', "`"]))
    return q + draw(_quoted_body) + q


_emails = st.tuples(_label, _label, _tld).map(lambda t: f"{t[0]}.x@{t[1]}.{t[2]}")

# Per slot: a strategy for its values (a fixed format where real systems keep one).
_SLOTS = {
    "path": st.just(_paths),
    "number": st.just(_numbers),
    "id": _id_formats,
    "host": st.just(hosts()),
    "port": st.just(_port.map(str)),
    "url": st.just(urls()),
    "timestamp": st.just(timestamps()),
    "quoted": st.just(quoted()),
    "email": st.just(_emails),
}

# Constant words of templates: real error vocabulary, no digits, no dots, no month names.
_WORDS = [
    "connection",
    "refused",
    "timeout",
    "failed",
    "cannot",
    "open",
    "file",
    "missing",
    "permission",
    "denied",
    "while",
    "reading",
    "writing",
    "invalid",
    "value",
    "for",
    "key",
    "request",
    "to",
    "from",
    "after",
    "retries",
    "unexpected",
    "token",
    "in",
    "server",
    "returned",
    "lock",
    "held",
    "by",
    "process",
    "not",
    "found",
    "user",
    "job",
    "disk",
    "full",
    "on",
    "host",
    "port",
    "at",
    "quota",
    "exceeded",
    "schema",
    "mismatch",
]
_SEPS = [" ", " ", " ", ": ", ", ", " (", ") ", " = "]


@st.composite
def templates(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """A message template: constant parts and slot kinds, alternating (parts has one more entry)."""
    slots = draw(st.lists(st.sampled_from(sorted(_SLOTS)), min_size=1, max_size=4))
    parts = []
    for i in range(len(slots) + 1):
        words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4))
        text = " ".join(words)
        if i == 0:
            exc = draw(st.sampled_from(["", "ValueError: ", "ConnectionError: ", "OSError: "]))
            parts.append(exc + text + draw(st.sampled_from(_SEPS)))
        elif i == len(slots):
            parts.append(draw(st.sampled_from(_SEPS)) + text)
        else:
            parts.append(draw(st.sampled_from(_SEPS)) + text + draw(st.sampled_from(_SEPS)))
    return parts, slots


def _fill(parts: list[str], values: list[str]) -> str:
    out = parts[0]
    for value, part in zip(values, parts[1:], strict=True):
        out += value + part
    return out


@settings(max_examples=400, deadline=None)
@given(template=templates(), data=st.data())
def test_signature_ignores_the_details_that_vary(template: tuple[list[str], list[str]], data: st.DataObject) -> None:
    parts, slots = template
    strategies = [data.draw(_SLOTS[s], label=f"format of {s}") for s in slots]
    first = _fill(parts, [data.draw(s) for s in strategies])
    second = _fill(parts, [data.draw(s) for s in strategies])
    assert error_signature(first) == error_signature(second), (first, second)


@settings(max_examples=300, deadline=None)
@given(a=templates(), data=st.data())
def test_distinct_templates_keep_distinct_signatures(a: tuple[list[str], list[str]], data: st.DataObject) -> None:
    parts, slots = a
    # Another template: the same slots, one constant word changed.
    i = data.draw(st.integers(0, len(parts) - 1), label="part changed")
    word = data.draw(st.sampled_from(["corrupted", "unavailable", "rejected", "overflow"]), label="new word")
    other = list(parts)
    other[i] = other[i] + word + " " if i < len(parts) - 1 else other[i] + " " + word
    strategies = [data.draw(_SLOTS[s]) for s in slots]
    first = _fill(parts, [data.draw(s) for s in strategies])
    second = _fill(other, [data.draw(s) for s in strategies])
    assert error_signature(first) != error_signature(second), (first, second)


_dashed = st.lists(st.text(string.ascii_lowercase, min_size=1, max_size=8), min_size=1, max_size=3).map("-".join)


@st.composite
def internal_hosts(draw: st.DrawFn) -> str:
    """Host names without a known top-level domain: "ci-runner-7", "db-replica-3.eu-west", "node12:8080"."""
    name = draw(_dashed) + "-" + str(draw(st.integers(0, 999)))
    if draw(st.booleans()):
        name += "." + draw(_dashed.filter(lambda s: "-" in s))
    return name + (f":{draw(_port)}" if draw(st.booleans()) else "")


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["connecting to", "request to", "for host", "server", "cannot reach", "node"]),
    st.sampled_from(["", " timed out", " is not accepting connections", ": connection refused"]),
    st.lists(st.one_of(hosts(), internal_hosts()), min_size=2, max_size=2),
)
def test_hosts_without_a_known_domain_are_masked_in_context(intro: str, tail: str, pair: list[str]) -> None:
    one, other = (f"ConnectionError: {intro} {h}{tail}" for h in pair)
    assert error_signature(one) == error_signature(other), (one, other)


@given(st.text(max_size=300))
def test_signature_is_total_and_bounded(message: str) -> None:
    sig = error_signature(message)
    assert len(sig) <= 400
    assert sig == sig.strip()


@settings(max_examples=300, deadline=None)
@given(template=templates(), data=st.data())
def test_a_signature_is_its_own_signature(template: tuple[list[str], list[str]], data: st.DataObject) -> None:
    # So a signature pasted from `engram learning failures` finds its pattern again.
    parts, slots = template
    message = _fill(parts, [data.draw(data.draw(_SLOTS[s])) for s in slots])
    sig = error_signature(message)
    assert error_signature(sig) == sig


# -- worked examples ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (
            "ConnectionRefusedError: [Errno 111] Connection refused: 10.0.0.12:5432",
            "ConnectionRefusedError: [Errno 111] Connection refused: db-3.prod.example.com:6543",
        ),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/home/alice/in.csv'",
            "FileNotFoundError: [Errno 2] No such file or directory: 'C:\\data\\other file.csv'",
        ),
        ("TimeoutError: job 7f3a9c1 timed out after 30s", "TimeoutError: job 0b2e8d4f99 timed out after 120s"),
        ("KeyError: 'user_id'", "KeyError: 'email'"),
        (
            "object <Foo at 0x7f3a2b1c9d00> is not serializable",
            "object <Foo at 0x10a2b3c4> is not serializable",
        ),
        (
            "GET https://api.example.com/v1/users/42 failed at 2024-01-15T10:30:00Z",
            "GET https://api.example.com/v1/users/97?x=1 failed at 2025-03-02T08:01:59.120+02:00",
        ),
        (
            "lock held by pid 4123 on /var/run/app.pid since Mon, 15 Jan 2024 10:30:00 GMT",
            "lock held by pid 77 on /var/run/other.pid since Tue, 02 Apr 2024 23:01:10 GMT",
        ),
        (
            'Traceback (most recent call last):\n  File "/srv/a.py", line 3, in <module>\n    main()\n'
            "ValueError: invalid literal for int() with base 10: 'abc'",
            'Traceback (most recent call last):\n  File "/home/b/c.py", line 99, in run\n    go()\n'
            "ValueError: invalid literal for int() with base 10: 'x y'",
        ),
        ("missing keys: 'a'", "missing keys: 'a', 'b', 'c'"),
        ("connect to [2001:db8::1]:443 failed", "connect to [fe80::2]:8443 failed"),
        ("Redis at localhost:6379. Connection refused.", "Redis at 10.1.2.3:6380. Connection refused."),
        ("request to ci-runner-7 timed out", "request to db-replica-3.eu-west timed out"),
        ("request to worker-42.prod.example.net timed out", "request to runner-eu-112:8080 timed out"),
    ],
)
def test_occurrences_of_one_failure_share_a_signature(one: str, other: str) -> None:
    assert error_signature(one) == error_signature(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("HTTP 404 Not Found for /a", "HTTP 500 Not Found for /a"),
        ("process exited with code 1", "process exited with code 137"),
        ("[Errno 2] failed", "[Errno 13] failed"),
        ("Connection refused by db.example.com", "Connection reset by db.example.com"),
        ("ValueError: bad input", "TypeError: bad input"),
        ("can't open 'x'", "can't read 'x'"),
        ("Error 111 connecting to localhost:6379.", "Error 110 connecting to localhost:6379."),
    ],
)
def test_different_failures_keep_different_signatures(one: str, other: str) -> None:
    assert error_signature(one) != error_signature(other)


def test_signature_reads_like_the_message() -> None:
    assert (
        error_signature("ConnectionError: cannot reach db-7.prod.example.com:5432 after 30s")
        == "ConnectionError: cannot reach <host> after <n>"
    )
    assert error_signature("AttributeError: 'NoneType' object has no attribute 'x'") == (
        "AttributeError: <str> object has no attribute <str>"
    )
    # Apostrophes inside words are not quotes; names that merely contain dots are not hosts.
    assert error_signature("can't call logger.info on std::io") == "can't call logger.info on std::io"
    # The exception class is never a detail, even with digits in its module.
    assert error_signature("sqlite3.OperationalError: database is locked") == (
        "sqlite3.OperationalError: database is locked"
    )
    # Plain words stay: only names with a digit, a hyphen or a dot are taken for hosts.
    assert error_signature("connect to the database failed") == "connect to the database failed"


def test_headline_and_exception_type() -> None:
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nrequests.exceptions.HTTPError: boom'
    assert headline(tb) == "requests.exceptions.HTTPError: boom"
    assert exception_type(tb) == "HTTPError"
    assert exception_type("ConnectionRefusedError: nope") == "ConnectionRefusedError"
    assert exception_type("Error: something") is None
    assert exception_type("disk full") is None


def test_error_text_of_exceptions() -> None:
    assert error_text(ValueError("bad value 3")) == "ValueError: bad value 3"
    assert error_text(KeyError("user_id")) == "KeyError: 'user_id'"
    assert error_text(RuntimeError()) == "RuntimeError"
    assert error_text("plain") == "plain"


def test_variable_parts_name_the_details() -> None:
    parts = variable_parts("cannot reach db.example.com:5432 from /srv/app.py after 3 tries")
    assert parts["host"] == ["db.example.com:5432"]
    assert parts["path"] == ["/srv/app.py"]
    assert parts["n"] == ["3"]


# -- grouping -------------------------------------------------------------------------------------------


def _occ(i: int, sig: str, key: str, **kw: object) -> Occurrence:
    return Occurrence(
        id=f"m{i}",
        message=kw.pop("message", sig),  # type: ignore[arg-type]
        signature=sig,
        key=key,
        error_type=kw.pop("error_type", None),  # type: ignore[arg-type]
        at=T0 + timedelta(minutes=i),
        **kw,  # type: ignore[arg-type]
    )


def test_grouping_joins_by_signature_and_by_key() -> None:
    occs = [
        _occ(0, "A <n>", "k1"),
        _occ(1, "A <n>", "k2"),  # same signature, another agent's key
        _occ(2, "A reworded <n>", "k1"),  # joined at write time by meaning
        _occ(3, "B <path>", "k3"),
    ]
    groups = group_occurrences(reversed(occs))
    assert [[o.id for o in g] for g in groups] == [["m0", "m1", "m2"], ["m3"]]


def test_best_match_prefers_identical_then_most_similar_of_same_type() -> None:
    cands = [
        Candidate(key="k1", signature="X: a <n>", error_type="X", similarity=0.95),
        Candidate(key="k2", signature="Y: a <n>", error_type="Y", similarity=0.99),
        Candidate(key="k3", signature="X: b <n>", error_type="X", similarity=0.90),
    ]
    assert best_match("X: c <n>", "X", cands, threshold=0.86)
    match = best_match("X: c <n>", "X", cands, threshold=0.86)
    assert match is not None
    assert match.key == "k1"
    assert best_match("X: c <n>", "X", cands, threshold=0.97) is None
    exact = best_match("X: b <n>", "X", cands, threshold=0.99)
    assert exact is not None
    assert exact.key == "k3"


def test_pattern_key_is_stable_and_agent_scoped() -> None:
    assert pattern_key("alice", "sig") == pattern_key("alice", "sig")
    assert pattern_key("alice", "sig") != pattern_key("bob", "sig")
    assert len(pattern_key("a", "b")) == 16


# -- fixes ----------------------------------------------------------------------------------------------


def test_solutions_are_counted_and_ranked() -> None:
    occs = [
        _occ(0, "s", "k", solution="restart the pool", failed_solutions=("retry",)),
        _occ(1, "s", "k", solution="restart the pool"),
        _occ(2, "s", "k", solution="retry"),
        _occ(3, "s", "k", failed_solutions=("retry", "clear cache")),
    ]
    sols = aggregate_solutions(occs)
    assert [s.solution for s in sols] == ["restart the pool", "retry", "clear cache"]
    best = sols[0]
    assert (best.successes, best.attempts) == (2, 2)
    assert best.success_rate == pytest.approx(3 / 4)
    retry = sols[1]
    assert (retry.successes, retry.attempts) == (1, 3)


def test_fixes_differing_only_in_details_are_one_fix() -> None:
    occs = [
        _occ(0, "s", "k", solution="raise the timeout to 30s"),
        _occ(1, "s", "k", failed_solutions=("raise the timeout to 45s",), solution="Raise the timeout to 60s"),
    ]
    sols = aggregate_solutions(occs)
    assert len(sols) == 1
    assert sols[0].solution == "Raise the timeout to 60s"
    assert (sols[0].successes, sols[0].attempts) == (2, 3)
    assert solution_key("pip install x==1.2") == solution_key("PIP install x==2.0")


fix_names = st.sampled_from(["a", "b", "c", "d"])


@given(
    st.lists(
        st.tuples(st.one_of(st.none(), fix_names), st.lists(fix_names, max_size=3)),
        max_size=30,
    )
)
def test_solution_statistics_invariants(rows: list[tuple[str | None, list[str]]]) -> None:
    occs = [_occ(i, "s", "k", solution=s, failed_solutions=tuple(f)) for i, (s, f) in enumerate(rows)]
    sols = aggregate_solutions(occs)
    for s in sols:
        assert 0 <= s.successes <= s.attempts
        assert 0 < s.success_rate < 1
        assert s.success_rate == pytest.approx((s.successes + 1) / (s.attempts + 2))
    rates = [s.success_rate for s in sols]
    assert rates == sorted(rates, reverse=True)
    assert sum(s.successes for s in sols) == sum(1 for s, _ in rows if s)


# -- prevention -----------------------------------------------------------------------------------------


def test_prevention_names_the_resource_and_the_fix() -> None:
    occs = [
        _occ(
            0,
            "ConnectionError: cannot reach <host>",
            "k",
            message="ConnectionError: cannot reach db.internal:5432",
            solution="restart the VPN",
            failed_solutions=("retry",),
        ),
        _occ(
            1,
            "ConnectionError: cannot reach <host>",
            "k",
            message="ConnectionError: cannot reach db2.internal:5432",
            solution="restart the VPN",
            failed_solutions=("retry",),
        ),
    ]
    pattern = build_pattern(occs)
    assert pattern.occurrences == 2
    assert pattern.id == "k"
    assert pattern.first_seen == T0
    assert pattern.last_seen == T0 + timedelta(minutes=1)
    checks = pattern.prevention
    assert checks[0].startswith("Before connecting to the host (e.g. db2.internal:5432), check that it is reachable")
    assert "Seen 2 times, last 2024-05-01: ConnectionError: cannot reach <host>" in checks[0]
    assert any(c.startswith("If it happens, first try: restart the VPN (worked 2 of 2 times)") for c in checks)
    assert any(c.startswith("Avoid: retry") for c in checks)


def test_prevention_is_deterministic_and_has_a_generic_fallback() -> None:
    kwargs = {
        "signature": "weird thing <n>",
        "example": "weird thing 3",
        "occurrences": 1,
        "solutions": [],
        "last_seen": T0,
    }
    assert prevention_checks(**kwargs) == prevention_checks(**kwargs)  # type: ignore[arg-type]
    assert prevention_checks(**kwargs) == ["Watch for this failure, seen 1 time, last 2024-05-01: weird thing <n>"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("signature", "slug"),
    [
        ("npm install timed out after <n> in CI", "npm-install-timeout"),
        ("npm install time-out after <n>", "npm-install-timeout"),
        ("TimeoutError: timed out", "timeout"),
        ("ModuleNotFoundError: No module named 'yaml'", "module-not-found-yaml"),
        ("ConnectionError: cannot reach <host> after <n>", "connection-cannot-reach"),
        ("in CI the build broke", "ci-build-broke"),
        ("", "failure"),
    ],
)
def test_pattern_slug_spells_timeouts_one_way_and_stops_at_circumstances(signature: str, slug: str) -> None:
    assert pattern_slug(signature) == slug
