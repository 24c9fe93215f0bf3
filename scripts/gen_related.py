"""Write ``src/engramdb/retrieval/data/related.txt``: each vocabulary word's nearest words by the bundled model.

Run once when the bundled model or its vocabulary changes (it needs the model; ~1.5 min on 2 cores):

    python scripts/gen_related.py

The words are the whole words of the bundled WordPiece vocabulary (``embeddings/data/vocab.txt``) that are
alphabetic, three letters or longer and no stopword. Each is embedded on its own; a word's related words are
the others whose cosine to it is at least ``--threshold``, nearest first, at most ``--most``, skipping those
that share its light stem (``evidence.stem``: an inflection, which coverage already matches). The table
ships with the package, so nothing is computed or downloaded at run time (:mod:`engramdb.retrieval.related`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from engramdb.config import load_settings
from engramdb.embeddings import make_embedder
from engramdb.retrieval.evidence import _ranks, stem
from engramdb.retrieval.text import STOPWORDS

OUT = Path(__file__).resolve().parents[1] / "src" / "engramdb" / "retrieval" / "data" / "related.txt"
HEADER = (
    "# Related words of the bundled model (all-MiniLM-L6-v2 int8, the BERT uncased vocabulary's whole words):\n"
    "# word, then its nearest words by cosine >= {threshold}, at most {most}, nearest first.\n"
    "# Made by scripts/gen_related.py; see engramdb/retrieval/related.py.\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=0.72)
    parser.add_argument("--most", type=int, default=4)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    words = [
        w for w, _ in sorted(_ranks().items(), key=lambda x: x[1]) if w.isalpha() and len(w) > 2 and w not in STOPWORDS
    ]
    embedder = make_embedder(load_settings())
    vectors = np.vstack(
        [np.asarray(embedder.embed(words[i : i + 512]), dtype=np.float32) for i in range(0, len(words), 512)]
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    stems = [stem(w) for w in words]
    lines = []
    for first in range(0, len(words), 1000):
        sims = vectors[first : first + 1000] @ vectors.T
        for row, s in enumerate(sims):
            own = first + row
            nearest = np.argpartition(-s, 32)[:32]
            seen, related = {stems[own]}, []
            for j in nearest[np.argsort(-s[nearest])]:
                if s[j] < args.threshold or len(related) >= args.most:
                    break
                if stems[j] not in seen:
                    seen.add(stems[j])
                    related.append(words[j])
            if related:
                lines.append(" ".join([words[own], *related]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        HEADER.format(threshold=args.threshold, most=args.most) + "\n".join(lines) + "\n", encoding="utf-8"
    )
    print(f"{len(lines)} words with related words -> {args.out}")


if __name__ == "__main__":
    main()
