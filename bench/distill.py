"""Distillation benchmark: does ``Distiller`` find the groups a person would, and does search survive it?

A labelled corpus (below): 30 groups of 3-8 paraphrased memories of realistic agent knowledge,
failures and decisions (several groups deliberately close in topic: two PostgreSQL facts, two
timeout fixes...), plus singletons that belong to no group. Each group has a held-out query,
never stored. Measured:

* grouping at several thresholds (the pure ``group_by_meaning`` on the stored vectors, groups of
  at least ``min_group`` = 3): purity (share of a found group's members from its majority true
  group, size-weighted), coverage (share of grouped true members that land in a found group whose
  majority is their own group), pairwise F1. The threshold is chosen on half the groups (even
  ids, "dev") and reported on the other half ("test"), then on all;
* end to end on a real store at the chosen threshold: ``Distiller.run(archive_sources=True)``,
  compression (visible memories before / after, archived sources hidden), and recall@5 of each
  group for its held-out query: raw store vs distilled store with archived sources left out (a
  hit is a source of the group, or a distilled memory most of whose sources are from it).

    python bench/distill.py            # writes bench/results/distill.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.services.context import ARCHIVED_TAG
from engramdb.services.distill import DEFAULT_THRESHOLD, Distiller, group_by_meaning

AGENT = "bench"
MIN_GROUP = 3
THRESHOLDS = tuple(round(0.45 + 0.025 * i, 3) for i in range(17))  # 0.45 .. 0.85
RESULTS = Path(__file__).resolve().parent / "results" / "distill.json"


@dataclass(frozen=True, slots=True)
class Group:
    """A true group: memories that say one thing, and a held-out query for it."""

    kind: str  # knowledge | failure | decision | code_pattern
    query: str
    members: tuple[str, ...]


# For failures a member is "error || context || fix"; for decisions "context || action || outcome".
GROUPS: tuple[Group, ...] = (
    Group(
        "knowledge",
        "which postgres version does staging run",
        (
            "The staging database runs PostgreSQL 15.4 on db-staging.internal.",
            "Staging uses Postgres 15 (host db-staging.internal).",
            "Our staging environment's database server is PostgreSQL version 15.",
            "db-staging.internal is a PostgreSQL 15 instance used for staging.",
        ),
    ),
    Group(
        "knowledge",
        "how are postgres migrations applied",
        (
            "Database migrations are applied with Alembic: run `alembic upgrade head` before starting the app.",
            "Run alembic upgrade head to apply pending schema migrations.",
            "Schema changes go through Alembic migrations; apply them with alembic upgrade head.",
            "Before deploying, apply the Alembic migrations (alembic upgrade head).",
            "We manage the Postgres schema with Alembic revisions, applied by `alembic upgrade head`.",
        ),
    ),
    Group(
        "knowledge",
        "what does the user want for indentation",
        (
            "The user wants Python code indented with 4 spaces, never tabs.",
            "Use four spaces for indentation in Python files; tabs are not allowed.",
            "Indent with 4 spaces (no tabs) in all Python code for this user.",
        ),
    ),
    Group(
        "knowledge",
        "which test framework to use",
        (
            "Tests are written with pytest, not unittest.",
            "The project uses pytest for all tests; do not add unittest.TestCase classes.",
            "Write new tests as plain pytest functions with fixtures.",
            "pytest is the test runner; run it with `pytest -q` from the repository root.",
            "Prefer pytest-style tests over unittest classes.",
            "All test suites run under pytest.",
        ),
    ),
    Group(
        "knowledge",
        "how does deployment to production work",
        (
            "Production deploys happen through GitHub Actions when a PR is merged to main.",
            "Merging to main triggers the GitHub Actions workflow that deploys to production.",
            "Deploying to prod is automatic: the deploy.yml GitHub Action runs on every merge into main.",
            "To ship to production, merge into main; GitHub Actions does the deployment.",
        ),
    ),
    Group(
        "knowledge",
        "payments api timeout fix",
        (
            "Calls to the payments API time out under load; raising the HTTP client timeout to 30s fixed it.",
            "When the payments API times out, increase the client timeout to 60 seconds.",
            "Payment API requests were timing out until we raised the httpx timeout to 45s.",
            "The payments service is slow at peak hours: use a client timeout of at least 30 seconds.",
            "Timeouts from api.payments.example.com go away with a longer request timeout (30s).",
        ),
    ),
    Group(
        "knowledge",
        "rate limit of the github api",
        (
            "The GitHub REST API allows 5000 requests per hour per token.",
            "GitHub's API rate limit is 5,000 requests an hour for authenticated calls.",
            "Authenticated GitHub API requests are capped at 5000/hour; check X-RateLimit-Remaining.",
            "Watch the X-RateLimit-Remaining header: GitHub only allows 5000 authenticated requests per hour.",
        ),
    ),
    Group(
        "knowledge",
        "where are secrets stored",
        (
            "Secrets live in AWS Secrets Manager under the prefix prod/app/.",
            "Never put credentials in the repo: they are stored in AWS Secrets Manager (prod/app/*).",
            "API keys and database passwords are kept in AWS Secrets Manager.",
            "Fetch secrets from AWS Secrets Manager at startup instead of reading .env files.",
        ),
    ),
    Group(
        "knowledge",
        "frontend build tool",
        (
            "The frontend is built with Vite; run `npm run build` to produce dist/.",
            "We use Vite (not webpack) to bundle the React frontend.",
            "Build the web UI with Vite: npm run build writes the bundle to dist/.",
        ),
    ),
    Group(
        "knowledge",
        "how to format code before commit",
        (
            "Run `ruff format` and `ruff check --fix` before committing.",
            "Code must be formatted with ruff format; CI fails on unformatted files.",
            "Before every commit, format with ruff and fix lint warnings with ruff check --fix.",
            "The pre-commit hook runs ruff format and ruff check.",
            "Formatting is enforced by ruff format in CI.",
        ),
    ),
    Group(
        "knowledge",
        "logging format in services",
        (
            "Services log JSON lines with structlog, one event per line.",
            "All backend logs are structured JSON emitted through structlog.",
            "Use structlog and log structured key-value events, rendered as JSON.",
            "Log output must be JSON (structlog's JSONRenderer) so Loki can parse it.",
        ),
    ),
    Group(
        "knowledge",
        "timezone for timestamps",
        (
            "Store every timestamp in UTC, timezone-aware; convert to local time only for display.",
            "Datetimes in the database are always UTC with tzinfo set.",
            "Never store naive datetimes: use timezone-aware UTC everywhere.",
            "Timestamps are saved in UTC and shown in the user's local time zone.",
        ),
    ),
    Group(
        "knowledge",
        "which python version is required",
        (
            "The service requires Python 3.11 or newer.",
            "Minimum supported Python version is 3.11.",
            "Use Python 3.11+; older interpreters are not supported.",
        ),
    ),
    Group(
        "knowledge",
        "kubernetes memory limits for workers",
        (
            "Worker pods need a 2Gi memory limit or they get OOMKilled during report generation.",
            "Set the worker deployment's memory limit to 2Gi; 1Gi leads to OOMKilled pods.",
            "Report workers run out of memory below 2 GiB: keep resources.limits.memory at 2Gi.",
            "OOMKilled workers were fixed by raising their Kubernetes memory limit to 2Gi.",
            "Kubernetes kills the report worker when its memory limit is under 2Gi.",
        ),
    ),
    Group(
        "knowledge",
        "cache invalidation for product pages",
        (
            "Product pages are cached in Redis for 10 minutes; purge the key product:<id> after an edit.",
            "After editing a product, delete its Redis cache entry so the page refreshes.",
            "Product page HTML is cached in Redis (TTL 600s) and must be invalidated on update.",
        ),
    ),
    Group(
        "knowledge",
        "user prefers concise answers",
        (
            "The user prefers short, direct answers without long explanations.",
            "Keep replies concise: the user dislikes verbose responses.",
            "Answer briefly and to the point; the user asked for less verbosity.",
            "The user wants terse answers, bullet points rather than paragraphs.",
        ),
    ),
    Group(
        "knowledge",
        "how to run the app locally",
        (
            "Start the local stack with `docker compose up`; the app listens on http://localhost:8000.",
            "Run docker compose up to get the API, Postgres and Redis locally (API on port 8000).",
            "For local development use docker compose up, then open localhost:8000.",
        ),
    ),
    Group(
        "knowledge",
        "feature flags service",
        (
            "Feature flags are managed in LaunchDarkly; new features ship dark behind a flag.",
            "Wrap new features in a LaunchDarkly flag and enable them gradually.",
            "We toggle features with LaunchDarkly flags rather than config files.",
        ),
    ),
    Group(
        "failure",
        "pip install fails behind the corporate proxy",
        (
            "SSLError: certificate verify failed while installing requests==2.31.0 || pip install on the build agent"
            " || set PIP_CERT to the corporate CA bundle",
            "SSLError: certificate verify failed while installing numpy==1.26.4 || installing dependencies in CI"
            " || point pip at the corporate CA with PIP_CERT",
            "SSLError: certificate verify failed while installing httpx==0.27.0 || pip install in the docker build"
            " || set PIP_CERT to the corporate CA bundle",
            "SSLError: certificate verify failed while installing pydantic==2.7.1 || pip install on a new laptop"
            " || set PIP_CERT to the corporate CA bundle",
        ),
    ),
    Group(
        "failure",
        "database connection refused",
        (
            "OperationalError: could not connect to server at db-7.prod.example.com:5432: Connection refused"
            " || running the nightly report || check the VPN is up and retry",
            "OperationalError: could not connect to server at db-3.prod.example.com:5432: Connection refused"
            " || starting the API against prod || check the VPN is up and retry",
            "OperationalError: could not connect to server at db-9.prod.example.com:5432: Connection refused"
            " || database migration job || connect the VPN, then retry",
            "OperationalError: could not connect to server at 10.0.4.17:5432: Connection refused"
            " || backfilling orders || check the VPN is up and retry",
            "OperationalError: could not connect to server at db-1.prod.example.com:5432: Connection refused"
            " || running the nightly report || check the VPN is up and retry",
        ),
    ),
    Group(
        "failure",
        "disk full on the build machine",
        (
            "OSError: [Errno 28] No space left on device: '/var/lib/docker/overlay2/a81f'"
            " || docker build on ci-runner-4 || docker system prune -af",
            "OSError: [Errno 28] No space left on device: '/var/lib/docker/tmp/x9' || building images on ci-runner-7"
            " || docker system prune -af",
            "OSError: [Errno 28] No space left on device: '/tmp/pip-build-3kd' || docker build on ci-runner-2"
            " || prune docker images and build cache",
        ),
    ),
    Group(
        "failure",
        "module not found yaml",
        (
            "ModuleNotFoundError: No module named 'yaml' || running the config loader || pip install pyyaml",
            "ModuleNotFoundError: No module named 'yaml' || loading settings in a fresh venv || pip install pyyaml",
            "ModuleNotFoundError: No module named 'yaml' || CI unit tests || add pyyaml to requirements",
        ),
    ),
    Group(
        "failure",
        "s3 access denied on upload",
        (
            "ClientError: An error occurred (AccessDenied) when calling the PutObject operation on bucket reports-2024"
            " || uploading the weekly report || attach s3:PutObject to the task role",
            "ClientError: An error occurred (AccessDenied) when calling the PutObject operation on bucket exports-eu"
            " || exporting user data || attach s3:PutObject to the task role",
            "ClientError: An error occurred (AccessDenied) when calling the PutObject operation on bucket media-prod"
            " || uploading thumbnails || grant s3:PutObject in the IAM role policy",
            "ClientError: An error occurred (AccessDenied) when calling the PutObject operation on bucket logs-archive"
            " || archiving logs || attach s3:PutObject to the task role",
        ),
    ),
    Group(
        "failure",
        "npm install peer dependency conflict",
        (
            "npm ERR! ERESOLVE unable to resolve dependency tree: peer react@18.2.0 from react-dom@18.2.0"
            " || npm install in the frontend || npm install --legacy-peer-deps",
            "npm ERR! ERESOLVE unable to resolve dependency tree: peer react@17.0.2 from react-router@6.3.0"
            " || adding the router || npm install --legacy-peer-deps",
            "npm ERR! ERESOLVE unable to resolve dependency tree: peer eslint@8.57.0 from eslint-plugin-react@7.34.1"
            " || upgrading eslint || align the peer versions, or npm install --legacy-peer-deps",
        ),
    ),
    Group(
        "decision",
        "the flaky integration test fails intermittently",
        (
            "the integration test suite fails intermittently on CI || rerun the failed job || failure",
            "flaky integration tests break the CI pipeline now and then || quarantine the flaky test and open a ticket"
            " || success",
            "integration tests fail randomly in CI || quarantine the flaky test and open a ticket || success",
            "CI integration tests are flaky || quarantine the flaky test and open a ticket || success",
            "an integration test passes locally but fails sometimes in CI || rerun the failed job || failure",
        ),
    ),
    Group(
        "decision",
        "api latency spike in production",
        (
            "p99 latency of the API spiked in production || roll back the last deploy || success",
            "production API response times jumped after a release || roll back the last deploy || success",
            "the API got slow in prod right after deploying || scale out the pods || failure",
            "latency alert: API p99 above 2s in production || roll back the last deploy || success",
        ),
    ),
    Group(
        "decision",
        "customer asks for a refund outside the policy window",
        (
            "a customer requests a refund 45 days after purchase, past the 30-day window"
            " || offer store credit || success",
            "refund requested after the refund window closed || offer store credit || success",
            "customer wants money back 2 months after buying, outside policy || refuse the refund || failure",
            "late refund request beyond the 30 days || offer store credit || success",
        ),
    ),
    Group(
        "decision",
        "choose a library for http requests",
        (
            "pick an HTTP client library for the new Python service || httpx || success",
            "which Python HTTP library to use for async calls || httpx || success",
            "choosing between requests and httpx for an asyncio service || httpx || success",
        ),
    ),
    Group(
        "code_pattern",
        "retry with exponential backoff",
        (
            "Retry transient errors with exponential backoff: for attempt in range(5): try: return call() except"
            " TransientError: time.sleep(2 ** attempt)",
            "Use tenacity for retries: @retry(wait=wait_exponential(multiplier=1, max=30), stop=stop_after_attempt(5))",
            "Wrap flaky network calls in a retry loop that doubles the delay after each failure, up to 5 attempts.",
            "Exponential backoff helper: sleep base * 2**n seconds between attempts, give up after max_attempts.",
        ),
    ),
    Group(
        "code_pattern",
        "read a csv file with pandas",
        (
            "Load a CSV with pandas: df = pd.read_csv(path, parse_dates=['created_at'])",
            "Read CSV data into a DataFrame using pandas.read_csv, parsing the date columns.",
            "pd.read_csv('orders.csv', parse_dates=['ordered_at']) loads the file with proper datetimes.",
        ),
    ),
)

SINGLETONS: tuple[tuple[str, str], ...] = (
    ("knowledge", "The office Wi-Fi password rotates on the first Monday of each month."),
    ("knowledge", "Invoices are generated on the 1st of every month by the billing cron job."),
    ("knowledge", "The marketing site is hosted on Netlify, separately from the app."),
    ("knowledge", "Our on-call rotation changes every Tuesday at 10:00 CET."),
    ("knowledge", "The search feature is backed by OpenSearch 2.11."),
    ("knowledge", "Customer support uses Zendesk; tickets sync to Slack #support."),
    ("knowledge", "The mobile app is written in Flutter."),
    ("knowledge", "Images are resized by a Lambda function triggered on S3 upload."),
    ("knowledge", "The user's name is Priya and she works in the Berlin office."),
    ("knowledge", "GraphQL is only used by the mobile app; the web app calls REST endpoints."),
    ("knowledge", "The analytics warehouse is BigQuery, loaded nightly by Airbyte."),
    ("knowledge", "Emails are sent through Postmark with a 500 messages/minute limit."),
    ("knowledge", "The design system lives in a separate repository called ui-kit."),
    ("knowledge", "Error tracking is done with Sentry; each environment has its own project."),
    ("knowledge", "The legacy admin panel is a Django app that nobody should extend."),
    ("knowledge", "Release notes are written in CHANGELOG.md following Keep a Changelog."),
    ("knowledge", "The CEO wants a weekly metrics summary every Friday."),
    ("knowledge", "PDF reports are rendered with WeasyPrint."),
    ("failure", "KeyError: 'customer_id' || parsing the webhook payload || use payload.get('customer_id')"),
    (
        "failure",
        "RecursionError: maximum recursion depth exceeded || walking the category tree || iterate with a stack",
    ),
    ("failure", "PermissionError: [Errno 13] Permission denied: '/etc/app/config.yml' || reading config || run as app"),
    ("failure", "TimeoutError: Redis did not answer within 5s || warming the cache || raise socket_timeout"),
    ("decision", "the nightly job takes too long || split it into parallel shards || success"),
    ("decision", "a teammate asks to skip code review for a hotfix || review it quickly anyway || success"),
    ("decision", "a new dependency has a GPL license || pick an MIT-licensed alternative || success"),
    ("code_pattern", "Use a context manager to open files: with open(path, encoding='utf-8') as f: data = f.read()"),
    ("code_pattern", "Debounce user input in React with a useEffect that clears a setTimeout on change."),
    ("code_pattern", "Paginate SQL with keyset pagination: WHERE id > :last_id ORDER BY id LIMIT :size."),
)


# -- corpus into a store ---------------------------------------------------------------------------------------


def load(mem: Engram) -> tuple[list[str], dict[str, int]]:
    """Store the corpus for AGENT; returns the ids in store order and each id's label (-1 for singletons)."""
    labels: dict[str, int] = {}
    ids: list[str] = []

    def add(kind: str, text: str, label: int) -> None:
        if kind == "failure":
            error, context, fix = (p.strip() for p in text.split("||"))
            m = mem.failures.record(error, agent=AGENT, context=context, solution=fix)
        elif kind == "decision":
            context, action, outcome = (p.strip() for p in text.split("||"))
            m = mem.learning.record(context, action, outcome, agent=AGENT)
        else:
            m = mem.remember(text, agent=AGENT, kind=kind, force=True)  # type: ignore[arg-type]
        labels[m.id] = label
        ids.append(m.id)

    for g, group in enumerate(GROUPS):
        for text in group.members:
            add(group.kind, text, g)
    for kind, text in SINGLETONS:
        add(kind, text, -1)
    return ids, labels


# -- grouping quality ------------------------------------------------------------------------------------------


def _pairs(groups: Sequence[Sequence[str]]) -> set[tuple[str, str]]:
    return {(a, b) for g in groups for i, a in enumerate(sorted(g)) for b in sorted(g)[i + 1 :]}


def grouping_scores(found: Sequence[Sequence[str]], labels: dict[str, int], ids: Sequence[str]) -> dict[str, float]:
    """Purity, coverage and pairwise precision/recall/F1 of ``found`` groups against the labels (over ``ids``)."""
    keep = set(ids)
    found = [[i for i in g if i in keep] for g in found]
    found = [g for g in found if len(g) >= MIN_GROUP]
    truth: dict[int, list[str]] = {}
    for i in ids:
        if labels[i] >= 0:
            truth.setdefault(labels[i], []).append(i)
    members = sum(len(g) for g in found)
    majority_hits = 0
    covered = 0
    for g in found:
        # A singleton is its own label: never part of a majority of another.
        counts = Counter(labels[i] if labels[i] >= 0 else f"s{i}" for i in g)
        label, n = counts.most_common(1)[0]
        majority_hits += n
        if isinstance(label, int):
            covered += n
    true_members = sum(len(g) for g in truth.values())
    found_pairs, true_pairs = _pairs(found), _pairs(list(truth.values()))
    tp = len(found_pairs & true_pairs)
    precision = tp / len(found_pairs) if found_pairs else 1.0
    recall = tp / len(true_pairs) if true_pairs else 1.0
    return {
        "groups_found": len(found),
        "true_groups": len(truth),
        "purity": majority_hits / members if members else 1.0,
        "coverage": covered / true_members if true_members else 1.0,
        "pair_precision": precision,
        "pair_recall": recall,
        "pair_f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
    }


def found_groups(mem: Engram, ids: Sequence[str], threshold: float) -> list[list[str]]:
    """``group_by_meaning`` per kind over the stored vectors, as the distiller runs it."""
    memories = {i: mem.get(i) for i in ids}
    vectors = mem.store.vectors.get(list(ids), model_id=mem.embedder.model_id)
    out: list[list[str]] = []
    for kind in sorted({m.kind for m in memories.values()}):
        kind_ids = [i for i in ids if memories[i].kind == kind]
        matrix = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in kind_ids])
        out += [[kind_ids[r] for r in rows] for rows in group_by_meaning(matrix, threshold)]
    return out


# -- search before and after -----------------------------------------------------------------------------------


def recall_at_5(mem: Engram, *, distilled: bool) -> list[bool]:
    """For each group's held-out query: is a member of the group (or its distilled memory) in the top 5?"""
    hits_ok = []
    for g, group in enumerate(GROUPS):
        hits = mem.search(group.query, agent=AGENT, limit=60)
        if distilled:
            hits = [h for h in hits if ARCHIVED_TAG not in h.memory.tags]
        top = hits[:5]
        ok = False
        for h in top:
            m = h.memory
            sources = m.metadata.get("distilled_from") if "distilled" in m.tags else None
            if isinstance(sources, list):
                votes = Counter(LABELS.get(s, -1) for s in sources)
                ok = ok or votes.most_common(1)[0][0] == g
            else:
                ok = ok or LABELS.get(m.id, -1) == g
        hits_ok.append(ok)
    return hits_ok


LABELS: dict[str, int] = {}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables, write bench/results/distill.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    out = Console()
    settings = load_settings({})
    embedder = make_embedder(settings)
    with tempfile.TemporaryDirectory() as tmp, Engram(Path(tmp) / "store", embedder=embedder) as mem:
        start = time.perf_counter()
        ids, labels = load(mem)
        LABELS.update(labels)
        load_s = time.perf_counter() - start
        dev = [i for i in ids if labels[i] % 2 == 0 or (labels[i] < 0 and ids.index(i) % 2 == 0)]
        test = [i for i in ids if i not in set(dev)]
        sweep: dict[str, dict[str, dict[str, float]]] = {}
        table = Table(title=f"Grouping by meaning (groups of >= {MIN_GROUP}; dev = even groups, test = odd)")
        for col in ("threshold", "dev F1", "test purity", "test coverage", "test F1", "all purity", "all coverage",
                    "all F1", "groups (all)"):  # fmt: skip
            table.add_column(col, justify="right")
        for t in THRESHOLDS:
            groups = found_groups(mem, ids, t)
            sweep[f"{t:.3f}"] = {
                "dev": grouping_scores(groups, labels, dev),
                "test": grouping_scores(groups, labels, test),
                "all": grouping_scores(groups, labels, ids),
            }
        # Best dev F1; on a tie the higher threshold (purer groups: a wrong merge costs more than a missed one).
        chosen = max(THRESHOLDS, key=lambda t: (round(sweep[f"{t:.3f}"]["dev"]["pair_f1"], 4), t))
        for t in THRESHOLDS:
            s = sweep[f"{t:.3f}"]
            mark = " *" if t == chosen else ""
            table.add_row(
                f"{t:.3f}{mark}",
                f"{s['dev']['pair_f1']:.3f}",
                f"{s['test']['purity']:.3f}",
                f"{s['test']['coverage']:.3f}",
                f"{s['test']['pair_f1']:.3f}",
                f"{s['all']['purity']:.3f}",
                f"{s['all']['coverage']:.3f}",
                f"{s['all']['pair_f1']:.3f}",
                f"{s['all']['groups_found']:g} / {s['all']['true_groups']:g}",
            )
        out.print(table)

        raw_recall = recall_at_5(mem, distilled=False)
        visible_before = mem.count(agent=AGENT)
        distiller = Distiller(mem._services, threshold=chosen)
        start = time.perf_counter()
        result = distiller.run(agent=AGENT, min_group=MIN_GROUP, archive_sources=True)
        distill_s = time.perf_counter() - start
        rerun = distiller.run(agent=AGENT, min_group=MIN_GROUP, archive_sources=True)
        archived = {m.id for m in mem.list(agent=AGENT, tags=[ARCHIVED_TAG], limit=10_000)}
        visible_after = mem.count(agent=AGENT) - len(archived)
        dist_recall = recall_at_5(mem, distilled=True)
        kept = sum(1 for r, d in zip(raw_recall, dist_recall, strict=True) if r and d)
        e2e: dict[str, Any] = {
            "threshold": chosen,
            "default_threshold_in_code": DEFAULT_THRESHOLD,
            "memories": len(ids),
            "distilled_memories": len(result.groups),
            "archived_sources": result.archived,
            "visible_before": visible_before,
            "visible_after": visible_after,
            "compression": visible_before / visible_after,
            "rerun_actions": dict(Counter(g.action for g in rerun.groups)),
            "recall_at_5_raw": sum(raw_recall) / len(GROUPS),
            "recall_at_5_distilled": sum(dist_recall) / len(GROUPS),
            "raw_hits_still_found": kept / max(1, sum(raw_recall)),
            "distill_seconds": distill_s,
            "load_seconds": load_s,
            "examples": [
                {
                    "kind": g.kind,
                    "sources": len(g.source_ids),
                    "confidence": g.confidence,
                    "basis": g.basis,
                    "content": g.memory.content,
                }
                for g in result.groups[:8]
            ],
        }
    t2 = Table(title=f"End to end at threshold {chosen:.2f} (sources archived)")
    t2.add_column("measure")
    t2.add_column("value", justify="right")
    for key in ("memories", "distilled_memories", "archived_sources", "visible_before", "visible_after"):
        t2.add_row(key, str(e2e[key]))
    t2.add_row("compression", f"{e2e['compression']:.2f}x")
    t2.add_row("recall@5 raw", f"{e2e['recall_at_5_raw']:.3f}")
    t2.add_row("recall@5 distilled", f"{e2e['recall_at_5_distilled']:.3f}")
    t2.add_row("raw hits still found", f"{e2e['raw_hits_still_found']:.3f}")
    t2.add_row("re-run", json.dumps(e2e["rerun_actions"]))
    t2.add_row("distill time", f"{e2e['distill_seconds']:.2f}s")
    out.print(t2)
    for ex in e2e["examples"][:5]:
        out.print(f"[dim]{ex['kind']} x{ex['sources']} ({ex['basis']} {ex['confidence']:.2f}):[/] {ex['content']}")
    payload: dict[str, Any] = {
        "benchmark": "distill",
        "model": embedder.model_id,
        "python": platform.python_version(),
        "corpus": {
            "groups": len(GROUPS),
            "grouped_memories": sum(len(g.members) for g in GROUPS),
            "singletons": len(SINGLETONS),
        },
        "min_group": MIN_GROUP,
        "sweep": sweep,
        "chosen_threshold": chosen,
        "end_to_end": e2e,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    out.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
