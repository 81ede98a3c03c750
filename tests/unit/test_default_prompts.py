"""The default configurations' prompts are the ones they were before the ``faithful`` configurations (issue 42):
each default prompt a ``faithful`` configuration replaces is rendered with fixed inputs and compared with the
snapshot taken on the code before (``tests/unit/snapshots/default_prompts.json``, keyed by the module's
``VERSION``: a deliberate change of a default prompt bumps its ``VERSION`` and retakes the snapshot with
``python -m tests.unit.test_default_prompts``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "default_prompts.json"


def _digest(messages: list[BaseMessage] | dict[str, Any]) -> str:
    text = json.dumps(
        messages if isinstance(messages, dict) else [[type(m).__name__, m.content] for m in messages], sort_keys=True
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render_defaults() -> dict[str, dict[str, str]]:
    """Each default prompt (module: its VERSION and the digest of each builder's messages)."""
    from logicmap.prompts import (
        coref,
        cues,
        explore,
        goalmem_decompose,
        goalmem_generate,
        goalmem_refine,
        goalmem_unify,
        plan,
        r2_extract,
        reconstruct,
        reconstruct_prune,
        respond,
    )

    q = "What did Maya adopt after moving to Lisbon?"
    renders: dict[str, Any] = {
        "explore": [
            explore.build_messages("Question: q\nSubgoals:\n  0. [ ] a", "(E1, 2023) x", "- E2 [causal] y"),
            explore.build_batch_messages("Question: q", "Event E1:\nx"),
        ],
        "plan": [plan.build_refine_messages(q, ["the pet"], "E1: moved to Lisbon")],
        "coref": [coref.build_messages("Pair 0:\nNEW: a\nSTORED: b")],
        "goalmem_decompose": [
            goalmem_decompose.build_messages(q, "find x: Maya adopted (x:pet)"),
            goalmem_decompose.build_messages(q, "find x: g", [("G1 => g", "G1 unproved")]),
        ],
        "goalmem_unify": [goalmem_unify.build_messages(q, "{}", [("G1", "Maya adopted (x:pet)")], [("D1:1", "x")])],
        "goalmem_refine": [goalmem_refine.build_messages(q, "g", "{}", [("G1", "a", "b")], [("D1:1", "x")])],
        "goalmem_generate": [goalmem_generate.build_messages(q, "g", "{x / Biscuit}", [("D1:1", "x")])],
        "reconstruct": [
            reconstruct.build_navigator_messages(
                q,
                question_date="2023-06-01",
                cues_text="Maya (person)",
                active_text="- [event S1-E1] x",
                max_turns=8,
                max_tool_calls=10,
                topics_text="T1: pets",
            ),
            reconstruct.build_final_messages(q, "[event S1-E1] x", "2023-06-01"),
            reconstruct.answer_tool_spec(),
        ],
        "reconstruct_prune": [reconstruct_prune.build_messages(q, "M1: x", "2023-06-01")],
        "respond": [respond.build_messages(q, "[F1] x", "2023-06-01")],
        "cues": [cues.build_messages("D1:1 Maya: I adopted a puppy.", "2023-06-01")],
        "r2_extract": [r2_extract.build_messages("D1:1 Maya: I adopted a puppy.", "1 June 2023", ["Maya", "Leo"])],
    }
    modules = {
        "explore": explore,
        "plan": plan,
        "coref": coref,
        "goalmem_decompose": goalmem_decompose,
        "goalmem_unify": goalmem_unify,
        "goalmem_refine": goalmem_refine,
        "goalmem_generate": goalmem_generate,
        "reconstruct": reconstruct,
        "reconstruct_prune": reconstruct_prune,
        "respond": respond,
        "cues": cues,
        "r2_extract": r2_extract,
    }
    return {
        name: {"version": modules[name].VERSION, "digests": ",".join(_digest(m) for m in built)}
        for name, built in renders.items()
    }


def test_the_default_prompts_are_unchanged() -> None:
    assert render_defaults() == json.loads(SNAPSHOT.read_text(encoding="utf-8"))


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(render_defaults(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
