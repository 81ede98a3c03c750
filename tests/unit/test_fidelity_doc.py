"""docs/fidelity.md's mutation table (written by ``evals/mutate.py --write``) agrees with the script and with the
method tables above it: every mutation is killed by a test or named equivalent with its reason, and each names a
row of its method's table whose rule is the paper's (faithful, partly, or the paper silent and the rule ours)."""

from __future__ import annotations

import re
from pathlib import Path

from logicmap.evals.mutate import END, MUTATIONS, START

DOC = Path(__file__).resolve().parents[2] / "docs" / "fidelity.md"
_BAR = re.compile(r"(?<!\\)\|")


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in _BAR.split(line.strip())[1:-1]]


def _elements() -> dict[str, dict[str, str]]:
    """Per method (its ``## `` section): each table row's paper element -> its verdict."""
    out: dict[str, dict[str, str]] = {}
    method = ""
    for line in DOC.read_text(encoding="utf-8").split(START)[0].splitlines():
        if line.startswith("## "):
            method = line[3:].strip()
        elif line.startswith("| ") and not line.startswith("| ---") and method:
            cells = _cells(line)
            if len(cells) == 3 and cells[0] != "paper element":
                out.setdefault(method, {})[cells[0]] = cells[2]
    return out


def _table() -> list[list[str]]:
    block = DOC.read_text(encoding="utf-8").split(START, 1)[1].split(END, 1)[0]
    rows = [_cells(line) for line in block.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    assert rows and rows[0] == ["method", "rule (docs/fidelity.md row)", "mutation", "outcome"]
    return rows[1:]


def test_every_mutation_in_the_table_is_killed_or_equivalent() -> None:
    rows = _table()
    assert len(rows) >= 40
    bad = [row for row in rows if not (row[3].startswith("killed by `tests/") or row[3].startswith("equivalent: "))]
    assert bad == []
    counts = re.search(r"(\d+) mutations: (\d+) killed, (\d+) survived, (\d+) equivalent\.", DOC.read_text())
    assert counts is not None and counts.group(3) == "0"
    assert int(counts.group(1)) == len(rows) == int(counts.group(2)) + int(counts.group(4))


def test_the_table_is_the_scripts_current_list() -> None:
    rows = _table()
    assert [(row[0], row[1]) for row in rows] == [(m.method, m.row) for m in MUTATIONS]
    for row, mutation in zip(rows, MUTATIONS):
        assert row[2].startswith(f"{mutation.what}: `{mutation.file}`")
        assert row[3].startswith("killed by") or row[3] == f"equivalent: {mutation.equivalent}"


def test_each_mutation_names_a_row_of_its_methods_table_whose_rule_is_the_papers() -> None:
    elements = _elements()
    assert set(elements) == {"Goal-Mem", "MRAgent", "Memory-R2", "REAL", "CompassMem"}
    for method, rule, _, _ in _table():
        verdict = elements[method].get(rule)
        assert verdict is not None, f"{method}: no row {rule!r}"
        assert verdict.startswith(("faithful", "partly", "paper silent")), (rule, verdict)


def test_the_rules_issue_42_found_unbound_are_covered() -> None:
    rules = {(row[0], row[1]) for row in _table()}
    covered = {
        ("CompassMem", "Explorer actions SKIP / EXPAND / ANSWER, <= 3 next nodes, annotated subgoals (Eq. 9-10)"),
        ("CompassMem", "Three parallel explorers"),
        ("CompassMem", "Topic layer: re-cluster all events every T = 4 construction steps (t mod T = 0)"),
        (
            "CompassMem",
            "Topic layer: online step, each new event joins its most similar topic if the similarity "
            "exceeds delta = 0.9, else opens a topic (App. B)",
        ),
        (
            "CompassMem",
            "A round ends when the queue is empty or every subgoal is satisfied; the Planner refines once, "
            "for the unsatisfied subgoals (App. B, 4.3.3)",
        ),
        ("Goal-Mem", "Targeted retrieval per subgoal (Eq. 3, Alg. 1 lines 9-11, 26-28)"),
        (
            "Goal-Mem",
            "Success: U(b,d) = {} over the accumulated Psi(b,<=d), answer variables bound (Alg. 1 lines 15, "
            "32; Sec. 4.4)",
        ),
        ("Memory-R2", "Related memories of a new fact (how `related_memory_ids` are found)"),
        ("REAL", "Defaults k=5, D_max=3, m=5, theta_stable=0.8, delta_QR=delta_LC=0.5"),
    }
    assert covered <= rules
    defaults = " ".join(row[2] for row in _table() if row[1].startswith("Defaults k=5"))
    for name in ("relevance_threshold", "coherence_threshold", "min_confidence", "depth"):
        assert f"{name}:" in defaults
