"""How many new events CompassMem's coreference judge is asked about: the default (only those whose most similar
stored event e* is at similarity >= ``merge_threshold``) against the paper's node fusion (``IngestContext.faithful``:
every new event with its e*).

Each conversation is ingested session by session with the no-LLM policy into a fresh memory; before each session
after the first, the event graph is read, and each of the session's events is compared with its e* there (the
events the session kept: the no-LLM rule merges only at 0.97, which no event reached on the bundled files).

    nice -n 10 env PYTHONPATH=<parent of the package> python -m logicmap.evals.bench.bench_fusion_candidates \\
        --embedder minilm data/sample_conversation.json data/holdout4_conversation.json
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from logicmap.evals.common import fresh_resources, print_table

__all__ = ["fusion_candidates", "main"]


def fusion_candidates(path: Path, *, embedder: str, threshold: float) -> list[float]:
    """The e* similarity of every new event after the first session of ``path``'s first conversation."""
    from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.memory.indexes.graph import EventGraph

    conversation = load_conversations(path)[0]
    sims: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh_resources(Path(tmp), embeddings=embedder)
        for i, session in enumerate(conversation.sessions):
            before = EventGraph.of(res.store.snapshot("ns")) if i else None
            part = conversation.model_copy(update={"sessions": [session]})
            ingest_conversation(
                part,
                "ns",
                resources=res,
                context=IngestContext(policy="heuristic", merge_threshold=threshold),
                append=i > 0,
            )
            if before is None:
                continue
            for event in res.store.snapshot("ns").events.values():
                if event.session_id == session.session_id:
                    vector = np.asarray(res.embeddings.embed_documents([event.summary])[0], dtype=np.float32)
                    best = before.top_k(vector, 1)
                    if best:
                        sims.append(float(best[0][1]))
        res.store.close()
    return sims


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--embedder", default="minilm", help="the embedding provider (the settings' names)")
    parser.add_argument("--threshold", type=float, default=0.9, help="the merge threshold")
    args = parser.parse_args(argv)
    rows = []
    for path in args.files:
        sims = fusion_candidates(path, embedder=args.embedder, threshold=args.threshold)
        judged = sum(s >= args.threshold for s in sims)
        rows.append(
            [
                path.name,
                len(sims),
                judged,
                len(sims),
                f"{np.median(sims):.3f}" if sims else "-",
                f"{max(sims):.3f}" if sims else "-",
            ]
        )
    print_table(["file", "new events", "judged (default)", "judged (faithful)", "median e* sim", "max e* sim"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
