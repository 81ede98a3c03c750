"""Mutation check of docs/fidelity.md: each rule marked faithful, replaced by a plausible alternative (another
constant, the older reading, the rule dropped), must make one of its method's tests fail.

Each mutation is applied alone to a COPY of the tree (``git archive REV`` into a temporary directory: the
worktree is never changed), and only that method's test files run (``pytest -x -q``); the first failing test is
recorded. A mutation that cannot change behaviour is listed as equivalent with the reason (it is still run: a
test that fails on it shows the claim wrong). The table goes to stdout, and with ``--write`` into
docs/fidelity.md between the markers ``<!-- mutation-table:start -->`` and ``<!-- mutation-table:end -->``.

    python -m logicmap.evals.mutate                  # every mutation, the table on stdout
    python -m logicmap.evals.mutate --write          # ... and into docs/fidelity.md
    python -m logicmap.evals.mutate --method real    # one method's mutations
    python -m logicmap.evals.mutate --rev <commit>   # the tests of another commit (e.g. before they were added)
    python -m logicmap.evals.mutate --record out.json; python -m logicmap.evals.mutate --render out.json --write
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "END",
    "MUTATIONS",
    "START",
    "TEST_FILES",
    "Mutation",
    "Outcome",
    "apply_mutation",
    "main",
    "render_table",
    "run_mutation",
    "write_table",
]

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- mutation-table:start -->", "<!-- mutation-table:end -->"

# Each method's test files, its paper trace first (pytest -x stops at the first failure).
TEST_FILES: dict[str, tuple[str, ...]] = {
    "CompassMem": (
        "tests/unit/test_paper_trace_compass.py",
        "tests/unit/test_topics.py",
        "tests/unit/test_compass.py",
        "tests/unit/test_compass_policy.py",
        "tests/unit/test_compass_calls.py",
        "tests/unit/test_ingest.py",
    ),
    "Goal-Mem": (
        "tests/unit/test_paper_trace_goalmem.py",
        "tests/unit/test_goalmem.py",
        "tests/unit/test_goalmem_policy.py",
    ),
    "REAL": ("tests/unit/test_paper_trace_real.py", "tests/unit/test_real.py", "tests/unit/test_real_policy.py"),
    "Memory-R2": (
        "tests/unit/test_paper_trace_r2.py",
        "tests/unit/test_r2.py",
        "tests/unit/test_r2_policy.py",
        "tests/unit/test_r2_production.py",
    ),
    "MRAgent": (
        "tests/unit/test_paper_trace_mragent.py",
        "tests/unit/test_reconstruct.py",
        "tests/unit/test_reconstruct_policy.py",
        "tests/unit/test_cues.py",
    ),
}


@dataclass(frozen=True)
class Mutation:
    """One rule replaced: ``old`` (exactly once in ``file``) becomes ``new``. ``row`` names the rule's row of
    docs/fidelity.md (its paper element); ``equivalent`` says why the mutant cannot change behaviour, if so."""

    method: str
    row: str
    file: str
    old: str
    new: str
    what: str
    equivalent: str | None = None

    @property
    def tests(self) -> tuple[str, ...]:
        return TEST_FILES[self.method]


@dataclass(frozen=True)
class Outcome:
    """What the method's tests did on the mutant: the first failing test (``killed``), or none."""

    mutation: Mutation
    killed_by: str | None
    seconds: float

    @property
    def verdict(self) -> str:
        if self.killed_by is not None:
            return "killed"
        return "equivalent" if self.mutation.equivalent else "SURVIVED"


def _m(method: str, row: str, file: str, old: str, new: str, what: str, equivalent: str | None = None) -> Mutation:
    return Mutation(method, row, file, old, new, what, equivalent)


C, G, R, M2, MR = "CompassMem", "Goal-Mem", "REAL", "Memory-R2", "MRAgent"
# The rows of docs/fidelity.md (their "paper element" cell) that several mutations share.
EXPLORER = "Explorer actions SKIP / EXPAND / ANSWER, <= 3 next nodes, annotated subgoals (Eq. 9-10)"
ROUND = (
    "A round ends when the queue is empty or every subgoal is satisfied; the Planner refines once, for the "
    "unsatisfied subgoals (App. B, 4.3.3)"
)
JOIN = (
    "Topic layer: online step, each new event joins its most similar topic if the similarity exceeds delta = 0.9, "
    "else opens a topic (App. B)"
)
RECLUSTER = "Topic layer: re-cluster all events every T = 4 construction steps (t mod T = 0)"
SUCCESS = "Success: U(b,d) = {} over the accumulated Psi(b,<=d), answer variables bound (Alg. 1 lines 15, 32; Sec. 4.4)"
DEFAULTS = "Defaults k=5, D_max=3, m=5, theta_stable=0.8, delta_QR=delta_LC=0.5"
RELATED = "Related memories of a new fact (how `related_memory_ids` are found)"
BUDGET = "Action selection C_LLM, navigate mode (Eq. 7-8)"
# The rows of the ``faithful`` configurations (issue 42, items 2-3): the papers' prompts and rules.
FUSION = "Node fusion: coreference / overlap judge, merge at similarity 0.9 (F.1, App. B)"
ACTION = "Explorer's Action Decision prompt (F.2)"
REFINE_PROMPT = "Refinement Query prompt (F.2)"
GOAL_PROMPTS = "Prompts (Appendix I)"
CAUSAL = "A CAUSAL beam follows CAUSAL edges only (III-B2)"
R2_ANSWER = "Answer prompt (Fig. 8)"
R2_EXTRACT = "Extraction prompt (Fig. 6)"
ROUTING = "Routing and pruning R_LLM (Eq. 9)"
QA = "QA and tool-use prompt (Appendix E)"
DIALOGUE = "Dialogue Processing prompt (Appendix E)"

MUTATIONS: list[Mutation] = [
    # -- CompassMem ----------------------------------------------------------------------------------------
    _m(
        C,
        EXPLORER,
        "agents/explorer.py",
        "if len(decision.next_events) > 3:",
        "if len(decision.next_events) > 4:",
        "an LLM explorer may name 4 next nodes",
    ),
    _m(
        C,
        EXPLORER,
        "graphs/strategies/compass.py",
        'for nxt in d["next_events"][:3]:',
        'for nxt in d["next_events"][:4]:',
        "the search follows 4 next nodes of a decision",
        equivalent="every decision reaching the search has at most 3 next nodes: an LLM's is validated "
        "(`validate_decision`, sent back, else SKIP), the no-LLM explorer names at most 3",
    ),
    _m(
        C,
        EXPLORER,
        "agents/explorer.py",
        'for j in np.argsort(-scores, kind="stable")[:3]:',
        'for j in np.argsort(-scores, kind="stable")[:4]:',
        "the no-LLM explorer expands to 4 neighbours",
    ),
    _m(
        C,
        "Three parallel explorers",
        "graphs/strategies/compass.py",
        "    explorers: int = 3\n",
        "    explorers: int = 2\n",
        "two explorers by default",
    ),
    _m(
        C,
        "Three parallel explorers",
        "graphs/strategies/compass.py",
        "    explorers: int = 3\n",
        "    explorers: int = 4\n",
        "four explorers by default",
    ),
    _m(
        C,
        "One global priority queue, p(u) = max over unsatisfied subgoals of sim (Eq. 11)",
        "graphs/strategies/compass.py",
        "for slot in range(explorers):",
        "for slot in range(0):",
        "no explorer takes queued events (only the starts are read)",
    ),
    _m(
        C,
        ROUND,
        "graphs/strategies/compass.py",
        '"max_steps": None,',
        '"max_steps": 6,',
        "the faithful budget keeps the step cap",
    ),
    _m(
        C,
        ROUND,
        "graphs/strategies/compass.py",
        'missing = [g for g, done in zip(state["subgoals"], state["satisfied"]) if not done]',
        'missing = list(state["subgoals"])',
        "the refinement is asked about every subgoal, satisfied ones too",
    ),
    _m(
        C,
        "Planner: 2-5 subgoals, satisfaction vector (Eq. 7)",
        "agents/planner.py",
        "if not 2 <= len(goals) <= 5:",
        "if not 1 <= len(goals) <= 5:",
        "a plan of one subgoal accepted",
    ),
    _m(
        C,
        "Topic layer: number of clusters max(2, min(floor(n/5), 50)) (App. B)",
        "memory/indexes/topics.py",
        "max(2, min(n_events // 5, 50))",
        "max(2, min(n_events // 4, 50))",
        "one cluster per 4 events",
    ),
    _m(C, JOIN, "memory/indexes/topics.py", "    delta: float = 0.9\n", "    delta: float = 0.8\n", "delta = 0.8"),
    _m(
        C,
        JOIN,
        "memory/indexes/topics.py",
        "best_sim > self.delta",
        "best_sim >= self.delta",
        "joins at a similarity equal to delta (the older `>=`)",
    ),
    _m(
        C,
        JOIN,
        "memory/indexes/topics.py",
        "best_sim > self.delta",
        "best_sim > -1.0",
        "the threshold dropped: every event joins its nearest topic",
    ),
    _m(
        C,
        RECLUSTER,
        "memory/indexes/topics.py",
        "    recluster_every: int = 4\n",
        "    recluster_every: int = 3\n",
        "T = 3 (the layer's default)",
    ),
    _m(
        C,
        RECLUSTER,
        "settings.py",
        "    recluster_every: int = 4\n",
        "    recluster_every: int = 5\n",
        "T = 5 (the settings' default)",
    ),
    _m(
        C,
        RECLUSTER,
        "graphs/ingest/nodes.py",
        "    recluster_every: int = 4\n",
        "    recluster_every: int = 5\n",
        "T = 5 (`IngestContext`'s default)",
    ),
    _m(
        C,
        RECLUSTER,
        "memory/indexes/topics.py",
        "steps % self.recluster_every == 0",
        "False",
        "re-clustering dropped (online steps only)",
    ),
    _m(
        C,
        'Responder (F.2): a short phrase, original wording, dates resolved, never "insufficient"',
        "prompts/respond.py",
        'lack sufficient information, do not state that the "\n',
        'lack sufficient information, state that the "\n',
        "the responder is told to say the information is insufficient",
    ),
    # The faithful configuration's prompts and node fusion (``CompassContext.faithful``, ``IngestContext.faithful``).
    _m(
        C,
        ACTION,
        "graphs/strategies/compass.py",
        "paper_prompts=ctx.faithful,",
        "paper_prompts=False,",
        "`faithful` asks with the project's explorer and refiner prompts",
    ),
    _m(
        C,
        ACTION,
        "prompts/explore.py",
        " - Be conservative: If ANY sub-goal remains unsatisfied, use EXPAND instead.\n",
        "",
        'the Action Decision Prompt without its "be conservative" rule',
    ),
    _m(
        C,
        REFINE_PROMPT,
        "graphs/strategies/compass.py",
        'satisfied = [g for g, done in zip(state["subgoals"], state["satisfied"]) if done]',
        "satisfied = []",
        "the refiner is not shown the satisfied sub-goals",
    ),
    _m(
        C,
        REFINE_PROMPT,
        "prompts/plan.py",
        '"5. NOT repeat the original question.\\n\\n"',
        '"\\n"',
        'the Refinement Query Prompt without its "NOT repeat the original question"',
    ),
    _m(
        C,
        FUSION,
        "graphs/ingest/nodes.py",
        "-np.inf if ctx.faithful else ctx.merge_threshold",
        "ctx.merge_threshold",
        "`faithful` judges only pairs at the merge threshold or above (the default's candidates)",
    ),
    _m(
        C,
        FUSION,
        "graphs/ingest/nodes.py",
        "similarity > threshold)",
        "similarity >= threshold)",
        "`faithful` merges at a similarity equal to the threshold (the default's `>=`)",
    ),
    _m(
        C,
        FUSION,
        "graphs/ingest/nodes.py",
        "policy.judge_paper(pairs, ctx.merge_threshold) if ctx.faithful else policy.judge(pairs)",
        "policy.judge(pairs)",
        "`faithful` asks the project's batched judge instead of the Coreference & Overlap Prompt",
    ),
    # -- Goal-Mem ------------------------------------------------------------------------------------------
    _m(
        G,
        "Targeted retrieval per subgoal (Eq. 3, Alg. 1 lines 9-11, 26-28)",
        "graphs/strategies/goalmem.py",
        "    max_memories: int = 60\n",
        "    max_memories: int = 50\n",
        "a cap of 50",
    ),
    _m(
        G,
        "Targeted retrieval per subgoal (Eq. 3, Alg. 1 lines 9-11, 26-28)",
        "graphs/strategies/goalmem.py",
        "    max_memories: int = 60\n",
        "    max_memories: int = 100\n",
        "a cap of 100",
    ),
    _m(
        G,
        SUCCESS,
        "graphs/strategies/goalmem.py",
        "solved = all(sid in resolved for sid in subgoals) and",
        'solved = all(sid in resolved for sid in subgoals if sid not in (state.get("antecedent_of") or {})) and',
        "success over the original subgoals only (the older reading)",
    ),
    _m(
        G,
        SUCCESS,
        "graphs/strategies/goalmem.py",
        " and all(a in result.substitution for a in _goal(state).answer)",
        "",
        "success without the answer variables bound",
        equivalent="every decomposition names every answer variable (`validate_decomposition`; the heuristic "
        "decompositions keep the goal's variables) and a subgoal is resolved only with all its "
        "variables bound (`apply_unification`), so every subgoal resolved implies every answer "
        "variable bound: the check is a guard",
    ),
    _m(
        G,
        "Memory reset per breadth step, M(b,0) = {} (Alg. 1 line 8; Eq. 3 unions over psi(b) only)",
        "graphs/strategies/goalmem.py",
        "    keep_pool_across_breadth: bool = False\n",
        "    keep_pool_across_breadth: bool = True\n",
        "one pool across the breadth steps (the older reading)",
    ),
    _m(
        G,
        "Stop when no new memory was retrieved (Alg. 1 line 35)",
        "graphs/strategies/goalmem.py",
        'stalled = depth >= 1 and state.get("new_in_step", 0) == 0',
        "stalled = False",
        "a depth step that retrieved nothing new goes on",
    ),
    _m(
        G,
        "B_max = 3, D_max = 5 (Sec. 5)",
        "graphs/strategies/goalmem.py",
        "    max_breadth: int = 3\n",
        "    max_breadth: int = 1\n",
        "one decomposition only",
    ),
    _m(
        G,
        "Refinement of the frontier, one antecedent per subgoal (Eq. 6, Alg. 1 lines 19-24)",
        "agents/goalmem.py",
        "MAX_ANTECEDENTS_PER_SUBGOAL = 1",
        "MAX_ANTECEDENTS_PER_SUBGOAL = 2",
        "two antecedents per subgoal kept",
        equivalent="a reply reaches `picked_antecedents` only after `validate_refinement`, which sends back a second "
        "antecedent for a subgoal whatever the constant, or as the empty fallback",
    ),
    _m(
        G,
        "Refinement of the frontier, one antecedent per subgoal (Eq. 6, Alg. 1 lines 19-24)",
        "agents/goalmem.py",
        '        if sid in seen:\n            problems.append(f"antecedent {i + 1}: {sid} already has',
        '        if False:\n            problems.append(f"antecedent {i + 1}: {sid} already has',
        "a second antecedent for a subgoal is not sent back (the first is kept)",
    ),
    _m(
        G,
        "LLM-call bound 1 + B(2 + 2D) (Appendix B)",
        "graphs/strategies/goalmem.py",
        "return 1 + max_breadth * (2 + 2 * max_depth)",
        "return 1 + max_breadth * (2 + max_depth)",
        "a bound of 1 + B(2 + D)",
    ),
    _m(
        G,
        "Grounded subgoals are skipped, kept in Psi (Appendix A)",
        "graphs/strategies/goalmem.py",
        'active = {sid: subgoals[sid] for sid in subgoals if sid not in (state.get("resolved") or {})}',
        "active = dict(subgoals)",
        "grounded subgoals are unified again",
    ),
    _m(
        G,
        GOAL_PROMPTS,
        "graphs/strategies/goalmem.py",
        "paper_prompts=ctx.faithful)",
        "paper_prompts=False)",
        "`faithful` asks with the project's prompts",
    ),
    _m(
        G,
        GOAL_PROMPTS,
        "prompts/goalmem_paper.py",
        "5. Do not invent constants.",
        "5. Prefer known constants.",
        "the refiner may invent constants",
    ),
    _m(
        G,
        GOAL_PROMPTS,
        "prompts/goalmem_paper.py",
        "ENTITY-ANCHOR CHECK (do this BEFORE selecting facts):",
        "CHECK:",
        "the unifier without its entity-anchor check heading",
    ),
    # -- REAL ----------------------------------------------------------------------------------------------
    _m(
        R,
        DEFAULTS,
        "graphs/strategies/real.py",
        "    relevance_threshold: float = 0.5\n",
        "    relevance_threshold: float = 0.4\n",
        "delta_QR = 0.4",
    ),
    _m(
        R,
        DEFAULTS,
        "graphs/strategies/real.py",
        "    relevance_threshold: float = 0.5\n",
        "    relevance_threshold: float = 0.6\n",
        "delta_QR = 0.6",
    ),
    _m(
        R,
        DEFAULTS,
        "graphs/strategies/real.py",
        "    coherence_threshold: float = 0.5\n",
        "    coherence_threshold: float = 0.4\n",
        "delta_LC = 0.4",
    ),
    _m(
        R,
        DEFAULTS,
        "graphs/strategies/real.py",
        "    coherence_threshold: float = 0.5\n",
        "    coherence_threshold: float = 0.6\n",
        "delta_LC = 0.6",
    ),
    _m(
        R,
        DEFAULTS,
        "graphs/strategies/real.py",
        "    min_confidence: float = 0.8\n",
        "    min_confidence: float = 0.7\n",
        "theta_stable = 0.7",
    ),
    _m(
        R,
        DEFAULTS,
        "graphs/strategies/real.py",
        "    min_confidence: float = 0.8\n",
        "    min_confidence: float = 0.9\n",
        "theta_stable = 0.9",
    ),
    _m(R, DEFAULTS, "graphs/strategies/real.py", "    depth: int = 3\n", "    depth: int = 2\n", "D_max = 2"),
    _m(R, DEFAULTS, "graphs/strategies/real.py", "    depth: int = 3\n", "    depth: int = 4\n", "D_max = 4"),
    _m(R, DEFAULTS, "graphs/strategies/real.py", "    candidates: int = 5\n", "    candidates: int = 4\n", "m = 4"),
    _m(
        R,
        "Stop when S_AS(P) >= max S_AS(P') (Eq. 7); the stopped path joins P_final",
        "graphs/strategies/real.py",
        "if not own or mine >= max(_sufficiency(c) for c in own):",
        "if not own or mine > max(_sufficiency(c) for c in own):",
        "Stop only when strictly more sufficient",
    ),
    _m(
        R,
        "Expand: insert the expansions with S_AS > S_AS(P) (Eq. 8)",
        "graphs/strategies/real.py",
        "pool.extend(c for c in own if _sufficiency(c) > mine)",
        "pool.extend(own)",
        "every expansion inserted",
    ),
    _m(
        R,
        "NeedCounterfactual: no candidate, max S_QR < delta_QR, or max S_LC < delta_LC",
        "graphs/strategies/real.py",
        "    if not expansions:\n        return True\n",
        "    if not expansions:\n        return False\n",
        "no repair when there is no candidate",
    ),
    _m(
        R,
        "Budget B_cf = max(0, m - |N_rel|)",
        "graphs/strategies/real.py",
        "    return max(0, m - relevant)\n",
        "    return m\n",
        "the budget is always m",
        equivalent="the budget is asked only when the trigger holds, and then no expansion has both S_QR >= "
        "delta_QR and S_LC >= delta_LC: |N_rel| = 0 and B_cf = m",
    ),
    _m(
        R,
        "Intent carried per hop, `P (+) (u, iota_u)` (Eq. 5)",
        "graphs/strategies/real.py",
        'return path.model_copy(update={"intent": fact.intent})',
        "return path",
        "the root's intent held for the whole path",
    ),
    _m(
        R,
        "AggregateEvidence(P_final)",
        "graphs/strategies/real.py",
        "    top_k: int | None = None\n",
        "    top_k: int | None = 5\n",
        "the final set cut to the top five (the older reading)",
    ),
    _m(
        R,
        CAUSAL,
        "memory/retrieval/fact_paths.py",
        '"CAUSAL": frozenset({"CAUSAL"})}',
        '"CAUSAL": frozenset({"CAUSAL", "TEMPORAL", "EVOLUTION"})}',
        "`faithful`'s causal beam also admits TEMPORAL and EVOLUTION facts (the default's table)",
    ),
    _m(
        R,
        CAUSAL,
        "graphs/strategies/real.py",
        "PAPER_INTENT_COMPATIBILITY if ctx.faithful else INTENT_COMPATIBILITY",
        "INTENT_COMPATIBILITY",
        "`faithful` searches with the default's table",
    ),
    # -- Memory-R2 -----------------------------------------------------------------------------------------
    _m(
        M2,
        RELATED,
        "agents/r2.py",
        "related[index] = list(dict.fromkeys([*similar, *same]))",
        "related[index] = list(dict.fromkeys(similar))",
        "facts on the same subject and attribute no longer related",
    ),
    _m(
        M2,
        "Decision procedure: DELETE each contradicted related memory, then NOOP if held, UPDATE if refined, else INSERT (Fig. 7)",
        "agents/r2.py",
        'f" (related: {',
        'f" (memories: {',
        "the prompt does not mark the ids as related",
    ),
    _m(
        M2,
        "Compression penalty lambda = 0.3 (Fig. 4)",
        "evals/train/logo_grpo.py",
        "def compression_penalty(memory_size: int, normalizer: int, weight: float = 0.3)",
        "def compression_penalty(memory_size: int, normalizer: int, weight: float = 0.2)",
        "lambda = 0.2",
    ),
    _m(
        M2,
        "Curriculum 8 -> 16 -> 32 sessions",
        "evals/train/logo_grpo.py",
        "DEFAULT_STAGES = (8, 16, 32)",
        "DEFAULT_STAGES = (8, 16)",
        "a curriculum of 8 -> 16 sessions",
    ),
    _m(
        M2,
        "Monotonic memory, non-destructive UPDATE",
        "memory/records/r2.py",
        '"history": (*old.history, revision),',
        '"history": old.history,',
        "an UPDATE forgets the old text",
    ),
    _m(
        M2,
        R2_ANSWER,
        "graphs/strategies/r2.py",
        "    if ctx.faithful:\n        outcome = policy.respond_paper(",
        "    if False:\n        outcome = policy.respond_paper(",
        "`faithful` answers with the project's responder",
    ),
    _m(
        M2,
        R2_ANSWER,
        "prompts/r2_answer.py",
        "4. If the memories contain contradictory information, prioritize the most recent memory\n",
        "",
        'the answer prompt without "prioritize the most recent memory"',
    ),
    _m(
        M2,
        R2_ANSWER,
        "agents/r2_policy.py",
        'return [] if r2_answer.answer_span(reply.response) else ["no <answer>...</answer> span with the final answer"]',
        "return []",
        "a reply without an `<answer>` span is not sent back",
    ),
    _m(
        M2,
        R2_EXTRACT,
        "agents/ingest_policy.py",
        "            budget=self.budget,\n            paper=self.paper_prompts,\n            **self._trace(),\n",
        "            budget=self.budget,\n            **self._trace(),\n",
        "`faithful` extracts with the project's prompt",
    ),
    # -- MRAgent -------------------------------------------------------------------------------------------
    _m(
        MR,
        BUDGET,
        "graphs/strategies/reconstruct.py",
        "    max_turns: int = 8\n",
        "    max_turns: int = 7\n",
        "7 turns",
    ),
    _m(
        MR,
        BUDGET,
        "graphs/strategies/reconstruct.py",
        "    max_tool_calls_per_turn: int = 10\n",
        "    max_tool_calls_per_turn: int = 11\n",
        "11 tool calls per turn",
    ),
    _m(
        MR,
        "The seven typed tools under the paper's names (Table 4)",
        "tools/__init__.py",
        '    "query_conversation_time",\n',
        "",
        "six tools (no query_conversation_time)",
    ),
    _m(
        MR,
        ROUTING,
        "graphs/strategies/reconstruct.py",
        "new = [item for item in active if _item_key(item) not in held]",
        "new = list(active)",
        "`faithful`'s router re-judges everything gathered (the default's pruner)",
    ),
    _m(
        MR,
        ROUTING,
        "graphs/strategies/reconstruct.py",
        '"active": Overwrite([*context, *kept])',
        '"active": Overwrite(kept)',
        "`faithful` drops the reconstructed context H(t) after a round",
    ),
    _m(
        MR,
        ROUTING,
        "graphs/strategies/reconstruct.py",
        '        "cost": outcome.cost,\n        "route": "navigate",\n        "held"',
        '        "cost": outcome.cost,\n        "route": "answer" if outcome.output.answer_now and kept else "navigate",\n'
        '        "held"',
        "`faithful`'s routing step may end navigation (the default's `answer_now`)",
        equivalent="the router's typed reply (`CandidateSelection`) has no `answer_now`: the step's `PruneDecision` "
        "always carries False, so the route is navigate either way",
    ),
    _m(
        MR,
        QA,
        "graphs/strategies/reconstruct.py",
        "build = prompt.build_paper_navigator_messages if ctx.faithful else prompt.build_navigator_messages",
        "build = prompt.build_navigator_messages",
        "`faithful` navigates with the project's prompt",
    ),
    _m(
        MR,
        QA,
        "prompts/reconstruct.py",
        '"- Counting questions: answer with the number of relevant items.\\n"',
        "",
        "the QA prompt without its counting rule",
    ),
    _m(
        MR,
        DIALOGUE,
        "agents/cue_extractor.py",
        "build = prompt.build_paper_messages if paper else prompt.build_messages",
        "build = prompt.build_messages",
        "`faithful` extracts cues with the project's prompt",
    ),
    _m(
        MR,
        DIALOGUE,
        "agents/cue_extractor.py",
        "if len(unit.tags) != 1 or len(unit.tags[0].split()) > 2:",
        "if not unit.tags:",
        "a unit may have several tags or a longer one",
    ),
]


def apply_mutation(root: Path, mutation: Mutation) -> str:
    """Apply ``mutation`` in the tree at ``root``; return the file's original text (to restore it)."""
    path = root / mutation.file
    text = path.read_text(encoding="utf-8")
    count = text.count(mutation.old)
    if count != 1:
        raise ValueError(f"{mutation.file}: the mutation's old text occurs {count} times, not once: {mutation.old!r}")
    path.write_text(text.replace(mutation.old, mutation.new, 1), encoding="utf-8")
    return text


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def run_mutation(root: Path, mutation: Mutation, python: str, timeout: float = 900.0) -> Outcome:
    """Run the method's test files on the mutant at ``root`` (restored afterwards)."""
    original = apply_mutation(root, mutation)
    env = {
        **os.environ,
        "PYTHONPATH": str(root / ".typecheck"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    started = time.monotonic()
    try:
        done = subprocess.run(
            [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutation.tests],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = done.stdout + done.stderr
        failed = _FAILED.search(output)
        killed = failed.group(1) if failed else (f"pytest exit {done.returncode}" if done.returncode else None)
    except subprocess.TimeoutExpired:
        killed = f"timeout after {timeout:.0f}s"
    finally:
        (root / mutation.file).write_text(original, encoding="utf-8")
    return Outcome(mutation, killed, time.monotonic() - started)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "\\n")


def render_table(outcomes: Sequence[Outcome]) -> str:
    """The markdown table (method, rule, mutation, outcome) and the counts."""
    lines = ["| method | rule (docs/fidelity.md row) | mutation | outcome |", "| --- | --- | --- | --- |"]
    for o in outcomes:
        m = o.mutation
        mutation = f"{m.what}: `{m.file}` `{_cell(m.old.strip())}` -> `{_cell(m.new.strip()) or '(removed)'}`"
        if o.killed_by is not None:
            result = f"killed by `{o.killed_by}`"
        elif m.equivalent:
            result = f"equivalent: {_cell(m.equivalent)}"
        else:
            result = "SURVIVED"
        lines.append(f"| {m.method} | {_cell(m.row)} | {mutation} | {result} |")
    counts = {v: sum(o.verdict == v for o in outcomes) for v in ("killed", "SURVIVED", "equivalent")}
    lines.append("")
    lines.append(
        f"{len(outcomes)} mutations: {counts['killed']} killed, {counts['SURVIVED']} survived, "
        f"{counts['equivalent']} equivalent."
    )
    return "\n".join(lines)


def write_table(doc: Path, table: str) -> None:
    """Replace what stands between the markers of ``doc`` with ``table``."""
    text = doc.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise ValueError(f"{doc}: no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{table}\n{END}{tail}", encoding="utf-8")


def _copy_tree(rev: str, into: Path) -> None:
    """``git archive REV`` unpacked at ``into``, importable as ``logicmap`` through ``into/.typecheck``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    (into / ".typecheck").mkdir(exist_ok=True)
    link = into / ".typecheck" / "logicmap"
    if not link.exists():
        link.symlink_to(into)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the commit whose tree (code and tests) is mutated")
    parser.add_argument("--method", choices=sorted(TEST_FILES), action="append", help="only these methods")
    parser.add_argument("--only", type=int, action="append", help="only these mutations (0-based index)")
    parser.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs pytest")
    parser.add_argument("--record", type=Path, help="also save the outcomes (JSON) to this file")
    parser.add_argument("--render", type=Path, help="run nothing: the table of the outcomes saved by --record")
    args = parser.parse_args(argv)
    chosen = [
        m
        for i, m in enumerate(MUTATIONS)
        if (not args.method or m.method in args.method) and (not args.only or i in args.only)
    ]
    if args.render is not None:
        try:
            saved = {(r["method"], r["file"], r["old"], r["new"]): r for r in json.loads(args.render.read_text())}
            outcomes = [
                Outcome(
                    m,
                    saved[(m.method, m.file, m.old, m.new)]["killed_by"],
                    saved[(m.method, m.file, m.old, m.new)]["seconds"],
                )
                for m in chosen
            ]
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: {args.render}: not the outcomes of these mutations ({exc!r})", file=sys.stderr)
            return 2
        return _report(outcomes, args.write)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="logicmap-mutate-") as tmp:
        root = Path(tmp)
        try:
            _copy_tree(args.rev, root)
        except subprocess.CalledProcessError as exc:
            print(f"error: cannot copy the tree of {args.rev}: {exc}", file=sys.stderr)
            return 2
        for i, mutation in enumerate(chosen, start=1):
            try:
                outcome = run_mutation(root, mutation, args.python)
            except ValueError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(
                f"[{i}/{len(chosen)}] {outcome.verdict:10s} {outcome.seconds:5.0f}s {mutation.method}: "
                f"{mutation.what} ({outcome.killed_by or '-'})",
                file=sys.stderr,
                flush=True,
            )
            outcomes.append(outcome)
    if args.record is not None:
        args.record.write_text(
            json.dumps(
                [
                    {
                        "method": o.mutation.method,
                        "file": o.mutation.file,
                        "old": o.mutation.old,
                        "new": o.mutation.new,
                        "killed_by": o.killed_by,
                        "seconds": round(o.seconds, 1),
                    }
                    for o in outcomes
                ],
                indent=1,
            )
            + "\n"
        )
    return _report(outcomes, args.write)


def _report(outcomes: Sequence[Outcome], write: bool) -> int:
    table = render_table(outcomes)
    print(table)
    if write:
        write_table(ROOT / "docs" / "fidelity.md", table)
    return 1 if any(o.verdict == "SURVIVED" for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
