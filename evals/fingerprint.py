"""Behaviour fingerprints: what a restructuring must leave byte-identical, written to a JSON file and compared.

For each conversation file (default: the bundled sample), the file is ingested with the no-LLM policy into a fresh
memory; the namespace's snapshot fingerprint (``NamespaceSnapshot.fingerprint``) is hashed, and every no-LLM
strategy answers every question of the file: its answer text, cited turns and turn ranking are recorded. Run it on
the old code and the new, then compare:

    python -m logicmap.evals.fingerprint --out /tmp/before.json              # on the old checkout
    python -m logicmap.evals.fingerprint --out /tmp/after.json --compare /tmp/before.json

It exits 1 and names the first differences when the two differ. ``--embedder minilm`` uses the offline MiniLM model
(slower); the default lexical embedder is enough to see a changed rule, order or record.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["compare", "fingerprint", "main"]

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_conversation.json"
NO_LLM = (
    "compass",
    "rerank",
    "goalmem",
    "real",
    "reconstruct",
    "dense",
    "bm25",
    "r2",
    "forward_reformulate",
    "forward_reflect",
    "forward_react",
)


def fingerprint(path: Path, *, embedder: str = "hashing", strategies: tuple[str, ...] = NO_LLM) -> dict[str, Any]:
    """The fingerprint of ``path``'s memory and of every strategy's no-LLM answers to its questions."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.strategies.registry import answer
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.settings import LogicMapSettings

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        res = Resources(settings=LogicMapSettings(data_dir=Path(tmp), embedding_provider=embedder))  # type: ignore[arg-type]  # a name from argparse choices
        try:
            for i, conversation in enumerate(load_conversations(path)):
                namespace = f"fp{i}"
                ingest_conversation(conversation, namespace, resources=res, policy="heuristic", memory_manager="r2")
                snap = json.dumps(res.store.snapshot(namespace).fingerprint(), sort_keys=True, default=str)
                answers: dict[str, list[Any]] = {}
                for strategy in strategies:
                    answers[strategy] = []
                    for qa in conversation.qa:
                        result = answer(strategy, qa.question, namespace, resources=res, policy="heuristic")
                        answers[strategy].append(
                            [qa.question, result.answer, result.cited_turns(10), list(result.turn_ranking or [])[:10]]
                        )
                out[conversation.conversation_id] = {
                    "snapshot_sha256": hashlib.sha256(snap.encode()).hexdigest(),
                    "answers": answers,
                }
        finally:
            res.store.close()
    return out


def compare(before: dict[str, Any], after: dict[str, Any], *, shown: int = 10) -> list[str]:
    """The differences between two fingerprints, one line each (at most ``shown`` answers named)."""
    lines = []
    for conv in sorted(set(before) | set(after)):
        old, new = before.get(conv), after.get(conv)
        if old is None or new is None:
            lines.append(f"{conv}: only in {'after' if old is None else 'before'}")
            continue
        if old["snapshot_sha256"] != new["snapshot_sha256"]:
            lines.append(f"{conv}: the memory's snapshot fingerprint differs")
        for strategy in sorted(set(old["answers"]) | set(new["answers"])):
            for a, b in zip(old["answers"].get(strategy, []), new["answers"].get(strategy, []), strict=False):
                if a != b and len(lines) < shown + 1:
                    lines.append(f"{conv} {strategy} {a[0]!r}: {a[1:]!r} -> {b[1:]!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=[SAMPLE])
    parser.add_argument("--embedder", choices=["hashing", "minilm"], default="hashing")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="a fingerprint file to compare with")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    found = {str(path.name): fingerprint(path, embedder=args.embedder) for path in args.files}
    args.out.write_text(json.dumps(found, indent=1, sort_keys=True))
    count = sum(len(a) for f in found.values() for c in f.values() for a in c["answers"].values())
    print(f"{count} answers fingerprinted in {time.perf_counter() - started:.0f} s -> {args.out}")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    diffs = [
        line for name in sorted(set(before) | set(found)) for line in compare(before.get(name, {}), found.get(name, {}))
    ]
    print("identical" if not diffs else "DIFFERENT:\n" + "\n".join(diffs))
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
