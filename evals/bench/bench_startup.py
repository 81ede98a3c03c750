"""Benchmark: LogicMap's footprint beside the reference (``InMemoryStore`` from langgraph plus ``langmem``), in one run.

Each figure is a fresh process (median of ``--repeat`` runs for times; the largest peak RSS, from ``wait4``):

- imports: ``from logicmap import LogicMapStore`` against ``from langgraph.store.memory import InMemoryStore;
  import langmem``, wall time and peak RSS, and the heavy modules the import pulls in;
- an app: the same small LangMem-style app on each store (``--items`` items put in batches of 100, as LangMem's
  ``manage_memory`` puts them, then, on LogicMapStore, ``flush()`` until every write is consolidated, then 20
  searches through LangMem's ``search_memory`` tool), its resident memory after the puts, at the end, and its peak. Both stores embed with the same deterministic hashing embedder (384 dimensions, bag of
  words: LogicMap's ``embedding_provider="hashing"``, an equal inline function for ``InMemoryStore``'s index), so
  the figure is the stores' own memory, not a model's. LogicMapStore runs twice: on ``store_url="memory://"``
  (this process's memory, nothing on disk: what ``InMemoryStore`` is) and on the default embedded Chroma;
- ``logicmap --help``, and ``logicmap ask`` on the sample conversation (ingested once beforehand into a private
  data directory, no LLM), per MiniLM runtime (``--runtimes``), cold: a fresh process each time.

Usage: ``python -m logicmap.evals.bench.bench_startup [--repeat 3] [--items 2000] [--chroma-items 300]
[--runtimes numpy,torch]``.
Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logicmap.data import sample_path
from logicmap.evals.common import machine_line, print_table

__all__ = ["main"]

HEAVY = (
    "torch",
    "chromadb",
    "sklearn",
    "scipy",
    "pandas",
    "nltk",
    "transformers",
    "sentence_transformers",
    "langchain_openai",
    "matplotlib",
    "networkx",
)
IMPORTS = {
    "reference: InMemoryStore + langmem": "from langgraph.store.memory import InMemoryStore; import langmem",
    "from logicmap import LogicMapStore": "from logicmap import LogicMapStore",
}
# The same LangMem-style app on either store: batched puts of one-line memories, then LangMem's search tool.
APP = """
import json, re, sys, hashlib, math
import numpy as np
from langgraph.store.base import PutOp
from langmem import create_search_memory_tool

kind, items, data_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
WORDS = ("dog walk park coffee hospital shift marathon race pottery class move city sister dinner sushi train trip "
         "beach book movie garden job interview vet appointment birthday party recipe violin tennis").split()

def embed(texts):
    out = []
    for text in texts:
        vector = np.zeros(384, dtype=np.float32)
        words = re.findall(r"[a-z0-9]+", text.lower())
        for gram in words + [a + "_" + b for a, b in zip(words, words[1:])]:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            vector[int.from_bytes(digest[:4], "little") % 384] += (1.0 if digest[4] & 1 else -1.0)
        norm = math.sqrt(float(vector @ vector))
        out.append((vector / norm if norm else vector).tolist())
    return out

if kind == "InMemoryStore":
    from langgraph.store.memory import InMemoryStore
    store = InMemoryStore(index={"dims": 384, "embed": embed})
else:
    from logicmap import LogicMapSettings, LogicMapStore, Resources
    url = "memory://" if kind.endswith("memory://") else None  # this process's memory, as InMemoryStore
    settings = LogicMapSettings(data_dir=data_dir, embedding_provider="hashing", store_url=url)
    store = LogicMapStore(resources=Resources(settings=settings), policy="heuristic")
rng = np.random.default_rng(7)
namespace = ("memories", "alice")
for lo in range(0, items, 100):
    store.batch([PutOp(namespace, f"m{i}", {"content": f"Memory {i}: I talked about " + " ".join(rng.choice(WORDS, 7))})
                 for i in range(lo, min(lo + 100, items))])
rss = lambda: next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:")) / 1024
after_puts = rss()
if hasattr(store, "flush"):
    store.flush()  # LogicMapStore: every write consolidated (its event graph built) before the searches
search = create_search_memory_tool(namespace=("memories", "{user_id}"), store=store)
for i in range(20):
    search.invoke({"query": " ".join(rng.choice(WORDS, 3))}, config={"configurable": {"user_id": "alice"}})
print(json.dumps({"rss_mb": rss(), "rss_puts_mb": after_puts}))
"""


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB (its own rusage, from ``wait4``) and stdout of one run of ``command``."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=errors)
        assert child.stdout is not None
        out = child.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            errors.seek(0)
            raise SystemExit(
                f"{' '.join(command[:4])}... failed ({child.returncode}): "
                f"{errors.read().decode(errors='replace').strip()[-400:]}"
            )
    return elapsed, usage.ru_maxrss / 1024, out


def _median(command: list[str], env: dict[str, str], repeat: int) -> tuple[float, float, list[str]]:
    runs = [_run(command, env) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs), [r[2] for r in runs]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--items", type=int, default=2000, help="items the app puts (0: no app rows)")
    parser.add_argument(
        "--chroma-items",
        type=int,
        default=None,
        help="items the app puts on Chroma (default: --items; a put there is an ingest and a commit)",
    )
    parser.add_argument("--runtimes", default="numpy", help="MiniLM runtimes for the cold ask (numpy,torch)")
    args = parser.parse_args(argv)
    print(machine_line())
    python, program = [sys.executable], [sys.executable, "-m", "logicmap"]
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "LOGICMAP_DATA_DIR": str(Path(tmp) / "memory")}
        env.pop("LOGICMAP_CHAT_MODEL", None)
        for label, code in IMPORTS.items():
            probe = f"{code}; import json, sys; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
            seconds, peak, outs = _median([*python, "-c", probe], env, args.repeat)
            heavy = sorted(set(json.loads(outs[-1])) & set(HEAVY))
            rows.append([label, f"{seconds:.2f} s", f"{peak:.0f} MB", f"heavy modules: {', '.join(heavy) or 'none'}"])
        if args.items:
            chroma_items = args.items if args.chroma_items is None else args.chroma_items
            apps = {
                "InMemoryStore": args.items,
                "LogicMapStore, store_url memory://": args.items,
                "LogicMapStore (Chroma on disk)": chroma_items,
            }
            for n, (kind, items) in enumerate(apps.items()):
                if not items:
                    continue
                app = [*python, "-c", APP, kind, str(items), str(Path(tmp) / f"app-{n}")]
                seconds, peak, outs = _median(app, env, 1)
                rss = json.loads(outs[-1].strip().splitlines()[-1])
                rows.append(
                    [
                        f"LangMem-style app on {kind}, {items} items (hashing embedder)",
                        f"{seconds:.1f} s",
                        f"{peak:.0f} MB",
                        f"RSS after the puts {rss['rss_puts_mb']:.0f} MB, at the end {rss['rss_mb']:.0f} MB",
                    ]
                )
        seconds, peak, _ = _median([*program, "--help"], env, args.repeat)
        rows.append(["logicmap --help", f"{seconds:.2f} s", f"{peak:.0f} MB", ""])
        _run([*program, "ingest", str(sample_path()), "-n", "sample", "--policy", "heuristic"], env)
        for runtime in args.runtimes.split(","):
            ask_env = {**env, "LOGICMAP_EMBEDDING_RUNTIME": runtime}
            seconds, peak, _ = _median(
                [*program, "ask", "Where does Maya live now?", "-n", "sample"], ask_env, args.repeat
            )
            rows.append([f"logicmap ask, cold (MiniLM runtime {runtime})", f"{seconds:.2f} s", f"{peak:.0f} MB", ""])
    print(f"median of {args.repeat} fresh processes (the app: one each); load average now {os.getloadavg()[0]:.1f}")
    print_table(["what", "wall", "peak RSS", "note"], rows)


if __name__ == "__main__":
    main()
