"""Redaction benchmark: recall and precision per kind of secret on a labelled corpus built here.

The corpus is generated from a fixed seed: true secrets (in the published formats of each
provider, freshly random, so none is real) embedded in realistic text (logs, config files,
shell history, chat, code, docs), and look-alikes that must survive (git SHAs, UUIDs, content
hashes, base64 images, placeholders, AWS's documented example keys, prose about passwords and
tokens, URLs without credentials, numbers that fail the Luhn check, documentation addresses).

Scoring is by span. A secret counts as found when the redacted spans cover it entirely (a
partial redaction leaks the rest); a redacted span is a true positive when it overlaps a
labelled secret; a look-alike survives when no redacted span touches it. The same corpus is
scored with Yelp's detect-secrets (its default plugins, line by line) when it is installed,
as a reference: ``pip install detect-secrets``.

    python bench/redaction.py                # full run, writes bench/results/redaction.json
    python bench/redaction.py --samples 200  # quicker
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from engramdb.models import RedactionPolicy
from engramdb.privacy.redact import find

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benign import BENIGN
from _redaction_corpus import build_corpus
from _redaction_gen import Sample

RESULTS_DIR = Path(__file__).resolve().parent / "results"
console = Console()

# -- scoring --------------------------------------------------------------------------------------------------

Span = tuple[int, int]
Detector = Callable[[Sample], list[tuple[str, int, int]]]


def engram_detector(policy: RedactionPolicy) -> Detector:
    def detect(sample: Sample) -> list[tuple[str, int, int]]:
        return [(f.kind, f.start, f.end) for f in find(sample.text, policy=policy)]

    return detect


_EXTENSIONS = {"code": ".py", "config": ".cfg"}


def detect_secrets_detector() -> Callable[[Sample], list[tuple[str, int, int]]] | None:
    """Yelp's detect-secrets as its users run it: default plugins and filters, one file per sample.

    (Its ad-hoc ``scan_line`` reports every entropy candidate unfiltered, which would be unfair.)
    Code samples are scanned as ``.py`` and config samples as ``.cfg`` files, since its keyword
    heuristics depend on the file type. Reported values are mapped back to spans on their line.
    """
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    tmp = Path(tempfile.mkdtemp(prefix="engram-redaction-bench-"))

    def detect(sample: Sample) -> list[tuple[str, int, int]]:
        path = tmp / f"sample{_EXTENSIONS.get(sample.genre, '.txt')}"
        path.write_text(sample.text)
        lines = sample.text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        found: list[tuple[str, int, int]] = []
        with default_settings():
            for secret in scan_file(str(path)):
                value = secret.secret_value
                if not value or not 1 <= secret.line_number <= len(lines):
                    continue
                line = lines[secret.line_number - 1]
                start = line.find(value)
                while start != -1:
                    base = offsets[secret.line_number - 1]
                    found.append((secret.type, base + start, base + start + len(value)))
                    start = line.find(value, start + 1)
        return found

    return detect


def _covered(span: Span, found: list[tuple[str, int, int]]) -> bool:
    """Whether the union of found spans covers ``span`` entirely."""
    start, end = span
    pos = start
    for _, s, e in sorted(found, key=lambda f: f[1]):
        if s <= pos < e:
            pos = e
        if pos >= end:
            return True
    return pos >= end


def _overlaps(a: Span, b: Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@dataclass
class Score:
    recall: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # kind -> [found, n]
    typed: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # kind -> found with the right kind
    precision: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # kind -> [tp, n]
    decoys: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # category -> [kept, n]
    seconds: float = 0.0
    chars: int = 0


def score(samples: Sequence[Sample], detect: Detector, *, kinds: set[str] | None = None) -> Score:
    """Score ``detect`` on ``samples``; labels outside ``kinds`` are ignored (neither found nor missed)."""
    result = Score()
    for sample in samples:
        t0 = time.perf_counter()
        found = detect(sample)
        result.seconds += time.perf_counter() - t0
        result.chars += len(sample.text)
        labels = [s for s in sample.secrets if kinds is None or s[0] in kinds]
        ignored = [s for s in sample.secrets if kinds is not None and s[0] not in kinds]
        for kind, start, end in labels:
            cell = result.recall[kind]
            cell[1] += 1
            if _covered((start, end), found):
                cell[0] += 1
                if any(k == kind and _overlaps((s, e), (start, end)) for k, s, e in found):
                    result.typed[kind] += 1
        for kind, start, end in found:
            if any(_overlaps((start, end), (s, e)) for _, s, e in ignored):
                continue  # a finding on a label of a disabled kind is neither right nor wrong here
            cell = result.precision[kind]
            cell[1] += 1
            if any(_overlaps((start, end), (s, e)) for _, s, e in labels):
                cell[0] += 1
        for category, start, end in sample.decoys:
            cell = result.decoys[category]
            cell[1] += 1
            if not any(_overlaps((start, end), (s, e)) for _, s, e in found):
                cell[0] += 1
    return result


def benign_changes(detect: Detector) -> dict[str, list[str]]:
    """The benign snippets ``detect`` would change, by genre and in all ("all")."""
    changed: dict[str, list[str]] = {genre: [] for genre in ["all", *(g for g, _ in BENIGN)]}
    for genre, text in BENIGN:
        if detect(Sample(text=text, genre=genre)):
            changed[genre].append(text)
            changed["all"].append(text)
    return changed


def _ratio(cell: Sequence[int]) -> float | None:
    return cell[0] / cell[1] if cell[1] else None


def _totals(table: dict[str, list[int]]) -> list[int]:
    return [sum(c[0] for c in table.values()), sum(c[1] for c in table.values())]


def summary(result: Score) -> dict[str, Any]:
    return {
        "recall": _ratio(_totals(result.recall)),
        "precision": _ratio(_totals(result.precision)),
        "lookalikes_kept": _ratio(_totals(result.decoys)),
        "per_kind": {
            kind: {
                "n": cell[1],
                "recall": _ratio(cell),
                "typed_correctly": result.typed[kind] / cell[1] if cell[1] else None,
                "precision": _ratio(result.precision[kind]) if kind in result.precision else None,
                "redactions": result.precision[kind][1] if kind in result.precision else 0,
            }
            for kind, cell in sorted(result.recall.items())
        },
        "findings_per_kind": {k: {"true": c[0], "n": c[1]} for k, c in sorted(result.precision.items())},
        "lookalikes": {k: {"kept": c[0], "n": c[1]} for k, c in sorted(result.decoys.items())},
        "chars_per_second": result.chars / result.seconds if result.seconds else None,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1000, help="corpus size (default 1000)")
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "redaction.json")
    parser.add_argument("--show-misses", action="store_true", help="print missed secrets and redacted look-alikes")
    args = parser.parse_args(argv)

    samples = build_corpus(args.samples, seed=args.seed)
    pii_kinds = {"email", "phone", "card_number"}
    secret_kinds = {k for s in samples for k, _, _ in s.secrets} - pii_kinds
    systems: dict[str, tuple[Detector, set[str]]] = {
        "engramdb (secrets)": (engram_detector(RedactionPolicy(secrets=True, pii=False)), secret_kinds),
        "engramdb (secrets+pii)": (engram_detector(RedactionPolicy(secrets=True, pii=True)), secret_kinds | pii_kinds),
    }
    reference = detect_secrets_detector()
    if reference is not None:
        systems["detect-secrets 1.x (reference)"] = (reference, secret_kinds)
    else:
        console.print("[yellow]detect-secrets is not installed: no reference column (pip install detect-secrets)[/]")

    results = {name: score(samples, det, kinds=kinds) for name, (det, kinds) in systems.items()}

    overview = Table(title=f"Redaction on {len(samples)} labelled samples (seed {args.seed})", title_justify="left")
    for col in ("system", "recall", "precision", "look-alikes kept", "chars/s"):
        overview.add_column(col, justify="right" if col != "system" else "left")
    for name, res in results.items():
        s = summary(res)
        overview.add_row(
            name, _pct(s["recall"]), _pct(s["precision"]), _pct(s["lookalikes_kept"]), f"{s['chars_per_second']:,.0f}"
        )
    console.print(overview)

    names = list(results)
    per_kind = Table(
        title="Per kind: recall (typed correctly) / precision of redactions of that kind", title_justify="left"
    )
    per_kind.add_column("kind")
    per_kind.add_column("n", justify="right")
    for name in names:
        per_kind.add_column(name, justify="right")
    all_kinds = sorted({k for r in results.values() for k in r.recall})
    for kind in all_kinds:
        n = max(r.recall[kind][1] for r in results.values() if kind in r.recall)
        cells = []
        for name in names:
            res = results[name]
            if kind not in res.recall:
                cells.append("-")
                continue
            rec = _ratio(res.recall[kind])
            if name.endswith("(reference)"):
                cells.append(_pct(rec))  # its own type names: only recall compares
                continue
            typed = res.typed[kind] / res.recall[kind][1]
            prec = _ratio(res.precision[kind]) if kind in res.precision else None
            cells.append(f"{_pct(rec)} ({_pct(typed)}) / {_pct(prec)}")
        per_kind.add_row(kind, str(n), *cells)
    console.print(per_kind)

    decoy_table = Table(title="Look-alikes kept intact", title_justify="left")
    decoy_table.add_column("category")
    decoy_table.add_column("n", justify="right")
    for name in names:
        decoy_table.add_column(name, justify="right")
    for category in sorted({c for r in results.values() for c in r.decoys}):
        n = next(r.decoys[category][1] for r in results.values())
        decoy_table.add_row(category, str(n), *[_pct(_ratio(results[name].decoys[category])) for name in names])
    console.print(decoy_table)

    benign = {name: benign_changes(det) for name, (det, _kinds) in systems.items()}
    benign_table = Table(
        title=f"Benign corpus ({len(BENIGN)} hand-written snippets, bench/_benign.py): share changed (false positives)",
        title_justify="left",
    )
    benign_table.add_column("genre")
    benign_table.add_column("n", justify="right")
    for name in names:
        benign_table.add_column(name, justify="right")
    for genre in [*sorted({g for g, _ in BENIGN}), "all"]:
        n = sum(1 for g, _ in BENIGN if genre in ("all", g))
        benign_table.add_row(genre, str(n), *[_pct(len(benign[name][genre]) / n) for name in names])
    console.print(benign_table)

    if args.show_misses:
        for text in benign["engramdb (secrets+pii)"]["all"]:
            console.print(f"[magenta]BENIGN changed[/]: {text!r}")
        detect, _kinds = systems["engramdb (secrets+pii)"]
        for sample in samples:
            found = detect(sample)
            for kind, start, end in sample.secrets:
                if not _covered((start, end), found):
                    console.print(f"[red]MISSED {kind}[/]: {sample.text[max(0, start - 40) : end + 10]!r}", markup=True)
            for category, start, end in sample.decoys:
                hit = [f for f in found if _overlaps((start, end), (f[1], f[2]))]
                if hit:
                    console.print(
                        f"[yellow]REDACTED look-alike {category}[/] as {hit[0][0]}: {sample.text[start:end]!r}"
                    )
            for kind, start, end in found:
                if not any(_overlaps((start, end), (s, e)) for _, s, e in sample.secrets):
                    console.print(f"[magenta]FALSE {kind}[/]: {sample.text[max(0, start - 30) : end + 10]!r}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "redaction",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "corpus": {
            "samples": len(samples),
            "seed": args.seed,
            "secrets": dict(Counter(k for s in samples for k, _, _ in s.secrets)),
            "lookalikes": dict(Counter(c for s in samples for c, _, _ in s.decoys)),
            "genres": dict(Counter(s.genre for s in samples)),
        },
        "systems": {name: summary(res) for name, res in results.items()},
        "benign": {
            "snippets": len(BENIGN),
            "changed": {name: {g: len(texts) for g, texts in b.items()} for name, b in benign.items()},
        },
    }
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
