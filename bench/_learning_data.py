"""Synthetic worlds for bench/learning.py: situations described in varied words, and recurring errors.

Every situation has training descriptions (used while learning) and held-out ones
(never seen while learning, only asked about afterwards), each a template whose
slots ({svc}, {host}, {n}) are filled at random, so the exact text rarely repeats.
Each situation has four possible actions with hidden success probabilities, and a
second set of probabilities that takes over midway (the best action changes).

Recurring errors are message templates whose details (paths, numbers, ids, hosts,
ports, quoted values) vary between occurrences; each has one fix that works.
Some share an exception type but need different fixes.
"""

from __future__ import annotations

import random
import string
import uuid
from dataclasses import dataclass

__all__ = [
    "ERRORS",
    "FIX_POOL",
    "SITUATIONS",
    "ErrorKind",
    "Situation",
    "Step",
    "fill",
    "held_out_queries",
    "make_stream",
]

SERVICES = ["billing", "orders", "payments", "search", "inventory", "shipping", "users", "analytics", "checkout"]
HOSTS = [
    "build-01.ci.internal",
    "ci-runner-7",
    "worker-42.prod.example.net",
    "api.partner-gateway.io",
    "db-replica-3.eu-west",
    "cache.staging.local",
    "10.0.3.17",
    "runner-eu-112",
]
USERS = ["alice", "bob", "deploy", "ci", "svc_app", "mlops"]
PROJECTS = ["atlas", "hermes", "zephyr", "orion", "lynx", "quartz"]
MODULES = ["yaml", "requests", "pandas", "boto3", "redis", "sqlalchemy", "httpx", "numpy"]
KEYS = ["customer_id", "total", "items", "shipping_address", "currency", "created_at"]
TABLES = ["orders", "events", "audit_log", "line_items", "sessions"]
REPOS = ["platform", "web-app", "infra", "data-pipeline", "mobile"]


def _word(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


def fill(template: str, rng: random.Random) -> str:
    """A template with its slots filled at random."""
    values = {
        "svc": rng.choice(SERVICES),
        "host": rng.choice(HOSTS),
        "n": str(rng.randint(2, 9000)),
        "n2": str(rng.randint(2, 900)),
        "port": str(rng.choice([80, 443, 5432, 8080, 8443, 9000, rng.randint(1024, 65535)])),
        "ip": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        "user": rng.choice(USERS),
        "proj": rng.choice(PROJECTS),
        "file": _word(rng),
        "mod": rng.choice(MODULES),
        "key": rng.choice(KEYS),
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
        "id": str(rng.randint(10_000, 99_999_999)),
        "table": rng.choice(TABLES),
        "repo": rng.choice(REPOS),
        "org": rng.choice(["acme", "initech", "globex"]),
        "hex": f"{rng.getrandbits(64):016x}",
    }
    return template.format(**values)


@dataclass(frozen=True)
class Situation:
    name: str
    train: tuple[str, ...]
    held_out: tuple[str, ...]
    #: Success probability of each action before and after the change.
    before: dict[str, float]
    after: dict[str, float]

    @property
    def options(self) -> list[str]:
        return list(self.before)

    def best(self, changed: bool) -> str:
        probs = self.after if changed else self.before
        return max(probs, key=lambda a: probs[a])


SITUATIONS: tuple[Situation, ...] = (
    Situation(
        "auth-expired",
        train=(
            "The {svc} API returned 401 Unauthorized after the access token expired",
            "Calls to {svc} fail with an authentication error: token expired {n} minutes ago",
            "{svc} rejects our requests because the OAuth credentials are no longer valid",
            "Login to the {svc} service fails with 'invalid token'",
        ),
        held_out=(
            "Our bearer token for {svc} seems stale and every request is denied as unauthorized",
            "Authentication against {svc} keeps failing since the session credentials expired",
        ),
        before={"refresh-credentials": 0.85, "retry-with-backoff": 0.3, "restart-service": 0.2, "escalate": 0.5},
        after={"refresh-credentials": 0.3, "retry-with-backoff": 0.3, "restart-service": 0.2, "escalate": 0.85},
    ),
    Situation(
        "rate-limited",
        train=(
            "{svc} responded 429 Too Many Requests",
            "We are being rate limited by the {svc} API after {n} calls per minute",
            "The {svc} endpoint throttles our client: quota exceeded",
            "Requests to {svc} bounce with 'rate limit exceeded, slow down'",
        ),
        held_out=(
            "{svc} says we sent too many requests in a short time and refuses more",
            "Hitting the request quota on {svc}; calls are being throttled",
        ),
        before={"retry-with-backoff": 0.85, "refresh-credentials": 0.2, "use-batch-endpoint": 0.5, "escalate": 0.3},
        after={"retry-with-backoff": 0.3, "refresh-credentials": 0.2, "use-batch-endpoint": 0.85, "escalate": 0.3},
    ),
    Situation(
        "db-timeout",
        train=(
            "Connection to the {svc} database timed out after {n2} seconds",
            "The postgres pool for {svc} cannot get a connection: timeout",
            "Database queries from {svc} hang and then fail with a connection timeout",
            "{svc} can't reach its database; connect timed out on port 5432",
        ),
        held_out=(
            "Opening a DB connection for {svc} takes forever and eventually gives up",
            "The {svc} service loses its database connection with timeouts under load",
        ),
        before={
            "increase-pool-size": 0.8,
            "restart-service": 0.45,
            "retry-with-backoff": 0.35,
            "failover-replica": 0.3,
        },
        after={
            "increase-pool-size": 0.3,
            "restart-service": 0.45,
            "retry-with-backoff": 0.35,
            "failover-replica": 0.85,
        },
    ),
    Situation(
        "disk-full",
        train=(
            "Build on {host} failed: no space left on device",
            "The disk on {host} is {n2}% full and writes are failing",
            "Writing artifacts on {host} fails because the volume is full",
            "{host} ran out of disk space during the build",
        ),
        held_out=(
            "No free storage remains on {host}, so the job cannot write its output",
            "The build machine {host} has a full filesystem",
        ),
        before={"clean-build-cache": 0.85, "restart-service": 0.2, "resize-volume": 0.55, "escalate": 0.4},
        after={"clean-build-cache": 0.3, "restart-service": 0.2, "resize-volume": 0.9, "escalate": 0.4},
    ),
    Situation(
        "flaky-test",
        train=(
            "Test test_{svc}_checkout failed on CI but passes locally",
            "The {svc} integration test fails intermittently, about 1 in {n2} runs",
            "A flaky test in the {svc} suite broke the pipeline again",
            "CI is red because of a nondeterministic failure in {svc} tests",
        ),
        held_out=(
            "The {svc} tests sometimes fail and sometimes pass without code changes",
            "An unreliable test keeps randomly breaking the {svc} build",
        ),
        before={"rerun-tests": 0.75, "quarantine-test": 0.5, "revert-last-commit": 0.25, "escalate": 0.35},
        after={"rerun-tests": 0.25, "quarantine-test": 0.85, "revert-last-commit": 0.25, "escalate": 0.35},
    ),
    Situation(
        "dependency-conflict",
        train=(
            "pip cannot resolve dependencies for {svc}: conflicting versions of requests",
            "Installing {svc} fails with a version conflict between two packages",
            "The {svc} build breaks after a dependency upgraded to version {n2}.0",
            "Dependency resolution for {svc} fails: incompatible requirements",
        ),
        held_out=(
            "Two libraries required by {svc} demand incompatible versions of the same package",
            "After a library release, {svc} no longer installs because of conflicting requirements",
        ),
        before={"pin-dependency": 0.8, "revert-last-commit": 0.5, "clean-build-cache": 0.3, "rerun-tests": 0.15},
        after={"pin-dependency": 0.3, "revert-last-commit": 0.85, "clean-build-cache": 0.3, "rerun-tests": 0.15},
    ),
    Situation(
        "out-of-memory",
        train=(
            "The {svc} worker was killed: out of memory",
            "{svc} crashed with MemoryError while processing a batch of {n} items",
            "The container for {svc} exceeded its memory limit and was OOM-killed",
            "Memory usage of {svc} grows until the process dies",
        ),
        held_out=(
            "The {svc} job runs out of RAM and the kernel terminates it",
            "{svc} uses too much memory and gets killed in the middle of the run",
        ),
        before={"reduce-batch-size": 0.8, "restart-service": 0.4, "raise-memory-limit": 0.55, "escalate": 0.3},
        after={"reduce-batch-size": 0.3, "restart-service": 0.4, "raise-memory-limit": 0.9, "escalate": 0.3},
    ),
    Situation(
        "dns-failure",
        train=(
            "Could not resolve host {host}",
            "DNS lookup for {host} failed from the {svc} service",
            "{svc} cannot connect: name resolution error for {host}",
            "Network error: getaddrinfo failed for {host}",
        ),
        held_out=(
            "The address of {host} cannot be found when {svc} tries to call it",
            "{svc} fails because the hostname {host} does not resolve",
        ),
        before={"failover-replica": 0.8, "retry-with-backoff": 0.55, "restart-service": 0.3, "escalate": 0.35},
        after={"failover-replica": 0.3, "retry-with-backoff": 0.85, "restart-service": 0.3, "escalate": 0.35},
    ),
)


@dataclass(frozen=True)
class ErrorKind:
    name: str
    template: str
    fix: str


ERRORS: tuple[ErrorKind, ...] = (
    ErrorKind(
        "missing-config",
        "FileNotFoundError: [Errno 2] No such file or directory: '/home/{user}/projects/{proj}/config.yaml'",
        "create the default config file",
    ),
    ErrorKind(
        "service-down",
        "ConnectionRefusedError: [Errno 111] Connection refused while connecting to {host}:{port}",
        "start the local service",
    ),
    ErrorKind(
        "upstream-503",
        "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
        "https://{host}/api/v{n2}/items/{id}",
        "retry with exponential backoff",
    ),
    ErrorKind(
        "too-many-connections",
        'psycopg.OperationalError: connection to server at "{ip}", port 5432 failed: FATAL: '
        'too many connections for role "{user}"',
        "close idle connections in the pool",
    ),
    ErrorKind(
        "missing-key",
        "KeyError: '{key}' while parsing the response of job {uuid}",
        "use .get with a default for optional fields",
    ),
    ErrorKind(
        "missing-env",
        "KeyError: 'DATABASE_URL' (environment variable not set in the {svc} container {hex})",
        "set the environment variable",
    ),
    ErrorKind(
        "log-permission",
        "PermissionError: [Errno 13] Permission denied: '/var/log/{proj}/{file}.log'",
        "fix the log directory ownership",
    ),
    ErrorKind(
        "network-timeout",
        "TimeoutError: request to {host} timed out after {n2} seconds",
        "increase the client timeout",
    ),
    ErrorKind(
        "array-memory",
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate {n} MiB for an array with shape "
        "({n}, {n2}) and data type float64",
        "process the data in chunks",
    ),
    # The module decides the fix (the package to install is not always named like the module), so these
    # two must not share a pattern, though their messages differ only in a quoted value.
    ErrorKind(
        "missing-yaml",
        "ModuleNotFoundError: No module named 'yaml'",
        "pip install pyyaml",
    ),
    ErrorKind(
        "missing-sklearn",
        "ModuleNotFoundError: No module named 'sklearn'",
        "pip install scikit-learn",
    ),
    ErrorKind(
        "bad-json",
        "json.decoder.JSONDecodeError: Expecting value: line {n2} column {n} (char {n})",
        "check that the upstream returns JSON",
    ),
    ErrorKind(
        "expired-cert",
        "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
        "certificate has expired (_ssl.c:{n}) for host {host}",
        "renew the TLS certificate",
    ),
    ErrorKind(
        "push-rejected",
        "error: failed to push some refs to 'git@github.com:{org}/{repo}.git' "
        "hint: Updates were rejected because the tip of your current branch is behind",
        "pull and rebase before pushing",
    ),
    ErrorKind(
        "redis-down",
        "ConnectionRefusedError: [Errno 111] Connection refused: Redis at {ip}:6379 is not accepting connections",
        "start redis",
    ),
    ErrorKind(
        "slow-query",
        'TimeoutError: canceling statement due to statement timeout after {n} ms on relation "{table}"',
        "add an index for the query",
    ),
)

#: Every fix an agent may try: the ones that work somewhere, and a few that never do.
FIX_POOL: tuple[str, ...] = (
    *dict.fromkeys(e.fix for e in ERRORS),
    "restart the machine",
    "clear the cache",
    "upgrade all dependencies",
)


# -- the decision stream -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    situation: Situation
    context: str
    #: One uniform draw per step: the outcome of action a is success iff draw < p(a) (common random numbers).
    draw: float
    changed: bool


def make_stream(seed: int, steps: int) -> list[Step]:
    rng = random.Random(seed)
    return [
        Step(
            situation=(s := rng.choice(SITUATIONS)),
            context=fill(rng.choice(s.train), rng),
            draw=rng.random(),
            changed=i >= steps // 2,
        )
        for i in range(steps)
    ]


def held_out_queries(seed: int, per_template: int = 6) -> list[tuple[Situation, str]]:
    rng = random.Random(seed + 10_000)
    return [(s, fill(t, rng)) for s in SITUATIONS for t in s.held_out for _ in range(per_template)]
