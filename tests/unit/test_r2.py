"""Memory-R2: edit validation, non-destructive updates, snapshot isolation, the manager and extractor
roles, and LoGo-GRPO data (rewards, compression penalty, advantages, curriculum, reward hook)."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logicmap.agents.r2 import (
    extract_facts,
    fact_key,
    fallback_extraction,
    heuristic_edits,
    manage_memory,
    sample_edits,
    third_person,
    update_fact_memory,
)
from logicmap.agents.testing import ScriptedChatModel
from logicmap.evals.train.logo_grpo import (
    LoGoConfig,
    LoGoRewardHook,
    build_logo_grpo_dataset,
    compression_penalty,
    curriculum_horizons,
    extract_sessions,
    group_advantages,
    local_session_points,
    run_rollout,
    score_memory,
    write_dataset,
)
from logicmap.memory.files.loaders import QAItem, RawTurn
from logicmap.memory.records.r2 import (
    CandidateFact,
    FactEdit,
    FactMemory,
    InvalidEditBatch,
    fact_memory_path,
    load_fact_memory,
    save_fact_memory,
)


def cands(*texts: str) -> list[CandidateFact]:
    return [CandidateFact(text=t, turn_ids=(f"D1:{i + 1}",)) for i, t in enumerate(texts)]


def seeded_memory() -> FactMemory:
    """F1 'Maya lives in Porto.', F2 'Leo likes sushi.', F3 'Maya works night shifts.'"""
    memory = FactMemory("unit")
    facts = cands("Maya lives in Porto.", "Leo likes sushi.", "Maya works night shifts.")
    memory.apply([FactEdit(op="ADD", fact=i) for i in range(3)], facts)
    return memory


# -- edit validation -----------------------------------------------------------------------------


def test_valid_batch_applies_in_decision_order() -> None:
    memory = seeded_memory()
    new = cands(
        "Maya lives in Lisbon.", "Maya adopted a dog named Biscuit.", "Leo likes sushi", "Maya quit night shifts."
    )
    edits = [
        FactEdit(op="ADD", fact=1),
        FactEdit(op="UPDATE", fact=0, id="F1"),
        FactEdit(op="DELETE", fact=3, id="F3"),
        FactEdit(op="NOOP", fact=2, id="F2"),
    ]
    assert memory.validate(edits, new) == []
    report = memory.apply(edits, new)
    assert (report.added, report.updated, report.deleted, report.noop) == (["F4"], ["F1"], ["F3"], 1)
    assert [r.text for r in memory.live()] == [
        "Maya lives in Lisbon.",
        "Leo likes sushi.",
        "Maya adopted a dog named Biscuit.",
    ]
    assert memory.step == 2


@pytest.mark.parametrize(
    ("edits", "needle"),
    [
        ([FactEdit(op="UPDATE", fact=0, id="F9")], "unknown memory id 'F9'"),
        ([FactEdit(op="DELETE", fact=0)], "names no memory id"),
        ([FactEdit(op="NOOP", fact=0, id="F42")], "unknown memory id 'F42'"),
        ([FactEdit(op="ADD", fact=0, text="  leo LIKES sushi!! ")], "already holds this fact as F2"),
        ([FactEdit(op="UPDATE", fact=0, id="F1", text="Maya lives in Porto")], "would not change"),
        ([FactEdit(op="ADD", fact=0), FactEdit(op="ADD", fact=0)], "new fact 0 has 2 edits"),
        ([FactEdit(op="ADD", fact=0), FactEdit(op="ADD", fact=5)], "numbered 0..0"),
        ([], "have no edit"),
    ],
)
def test_invalid_single_fact_batches(edits: list[FactEdit], needle: str) -> None:
    memory = seeded_memory()
    problems = memory.validate(edits, cands("Maya moved to Lisbon."))
    assert any(needle in p for p in problems), problems


def test_batch_level_rules() -> None:
    memory = seeded_memory()
    two = cands("Maya lives in Lisbon.", "Maya lives in Faro.")
    out_of_order = [FactEdit(op="UPDATE", fact=0, id="F1"), FactEdit(op="ADD", fact=1)]
    assert any("fixed decision order" in p for p in memory.validate(out_of_order, two))
    same_target = [FactEdit(op="UPDATE", fact=0, id="F1"), FactEdit(op="DELETE", fact=1, id="F1")]
    assert any("already changed by" in p for p in memory.validate(same_target, two))
    same_text = [FactEdit(op="ADD", fact=0, text="Ana visits."), FactEdit(op="ADD", fact=1, text="ana visits")]
    assert any("same text as" in p for p in memory.validate(same_text, two))
    memory.apply([FactEdit(op="DELETE", fact=0, id="F3")], cands("Maya quit night shifts."))
    gone = [FactEdit(op="UPDATE", fact=0, id="F3")]
    assert any("already deleted" in p for p in memory.validate(gone, cands("Maya works day shifts.")))


def test_invalid_batch_is_never_half_applied() -> None:
    memory = seeded_memory()
    before = memory.to_json()
    new = cands("Maya adopted a dog.", "Maya lives in Lisbon.")
    # The ADD alone is fine; the UPDATE names a missing record: nothing at all may change.
    with pytest.raises(InvalidEditBatch) as caught:
        memory.apply([FactEdit(op="ADD", fact=0), FactEdit(op="UPDATE", fact=1, id="F77")], new)
    assert "F77" in str(caught.value)
    assert memory.to_json() == before
    # ... and the next valid batch still gets the next id, as if the bad batch never happened.
    memory.apply([FactEdit(op="ADD", fact=0), FactEdit(op="NOOP", fact=1)], new)
    assert memory.get("F4").text == "Maya adopted a dog."


# -- non-destructive updates ----------------------------------------------------------------------


def test_update_keeps_history_and_delete_keeps_record() -> None:
    memory = seeded_memory()
    memory.apply(
        [FactEdit(op="UPDATE", fact=0, id="F1")], [CandidateFact(text="Maya lives in Lisbon.", turn_ids=("D4:1",))]
    )
    memory.apply(
        [FactEdit(op="UPDATE", fact=0, id="F1", text="Maya lives in Alfama, Lisbon.")],
        [CandidateFact(text="Maya's flat is in Alfama.", turn_ids=("D4:2",))],
    )
    record = memory.get("F1")
    assert record.text == "Maya lives in Alfama, Lisbon."
    assert [(h.text, h.step, h.replaced_at) for h in record.history] == [
        ("Maya lives in Porto.", 1, 2),
        ("Maya lives in Lisbon.", 2, 3),
    ]
    assert record.turn_ids == ("D1:1", "D4:1", "D4:2")
    assert record.history[0].turn_ids == ("D1:1",)

    memory.apply(
        [FactEdit(op="DELETE", fact=0, id="F3")], [CandidateFact(text="Maya quit night shifts.", turn_ids=("D3:3",))]
    )
    deleted = memory.get("F3")
    assert deleted.deleted and deleted.text == "Maya works night shifts." and deleted.deleted_by == ("D3:3",)
    assert deleted.deleted_step == 4
    assert "F3" not in {r.id for r in memory.live()}
    assert memory.size == 2 and len(memory.records(include_deleted=True)) == 3
    assert "night shifts" not in memory.render()


def test_persistence_round_trip_under_data_dir(tmp_path) -> None:
    memory = seeded_memory()
    memory.apply([FactEdit(op="UPDATE", fact=0, id="F1")], cands("Maya lives in Lisbon."))
    path = save_fact_memory(memory, tmp_path)
    assert path == fact_memory_path(tmp_path, "unit") and path.parent.name == "r2_facts"
    loaded = load_fact_memory("unit", tmp_path)
    assert loaded.to_dict() == memory.to_dict()
    loaded.apply([FactEdit(op="ADD", fact=0)], cands("Leo runs marathons."))
    assert loaded.get("F4") is not None  # the id counter survived the round trip
    assert load_fact_memory("other", tmp_path).size == 0
    with pytest.raises(ValueError):
        fact_memory_path(tmp_path, "../escape")


# -- snapshots ------------------------------------------------------------------------------------


def test_snapshot_shares_until_write_and_isolates_edits() -> None:
    base = seeded_memory()
    first, second = base.snapshot(), base.snapshot()
    assert first.shares_storage_with(base) and second.shares_storage_with(base)
    first.apply(
        [FactEdit(op="ADD", fact=0), FactEdit(op="UPDATE", fact=1, id="F1")],
        cands("Maya adopted Biscuit.", "Maya lives in Lisbon."),
    )
    second.apply([FactEdit(op="DELETE", fact=0, id="F1")], cands("Maya left Porto."))
    assert not first.shares_storage_with(base) and not first.shares_storage_with(second)
    assert base.get("F1").text == "Maya lives in Porto." and not base.get("F1").deleted and base.size == 3
    assert first.get("F1").text == "Maya lives in Lisbon." and first.get("F4").text == "Maya adopted Biscuit."
    assert second.get("F1").deleted and second.get("F1").text == "Maya lives in Porto." and second.get("F4") is None
    assert base.step == 1 and first.step == 2 and second.step == 2


def test_rollouts_from_one_snapshot_never_see_each_other(sample) -> None:
    sessions, _, _ = extract_sessions(sample)
    base = FactMemory("iso")
    run_rollout(base, sessions[:2])
    frozen = base.to_json()
    rollouts = [
        run_rollout(base.snapshot(), sessions[2:], rng=random.Random(seed), temperature=2.0) for seed in range(4)
    ]
    assert base.to_json() == frozen
    finals = {r.memory.to_json() for r in rollouts}
    assert len(finals) > 1, "sampled rollouts should differ"
    for rollout in rollouts:
        # Each rollout's memory is exactly its own edits replayed on a fresh copy of the base.
        replay = FactMemory.from_json(frozen)
        for step in rollout.steps:
            assert step.state_before.to_json() == replay.to_json()
            replay.apply(step.outcome.edits, step.candidates)
        assert replay.to_json() == rollout.memory.to_json()


# -- extractor and manager roles -----------------------------------------------------------------


def test_third_person_rewrite_and_fallback_extraction() -> None:
    assert third_person("I'm sure my dog likes you and your cat, we should meet.", "Maya", "Leo") == (
        "Maya is sure Maya's dog likes Leo and Leo's cat, Maya and Leo should meet."
    )
    turns = [
        RawTurn(dia_id="D1:1", speaker="Maya", text="I adopted a dog last month.", image_caption="a puppy"),
        RawTurn(dia_id="D1:2", speaker="Leo", text="That's wonderful!"),
    ]
    facts = fallback_extraction(turns, ["Maya", "Leo"]).facts
    assert [f.turn_ids for f in facts] == [["D1:1"], ["D1:2"]]
    assert facts[0].text == "Maya adopted a dog last month. (Maya shared an image of a puppy)"
    assert facts[1].text == "Leo said: That's wonderful!"


def test_extractor_retries_once_then_falls_back() -> None:
    turns = [RawTurn(dia_id="D1:1", speaker="Maya", text="I live in Porto.")]
    first_person = {"facts": [{"text": "I live in Porto", "turn_ids": ["D1:1"]}]}
    good = {"facts": [{"text": "Maya lives in Porto", "turn_ids": ["D1:1"]}]}
    llm = ScriptedChatModel(routes={"You are the fact extractor": [first_person, good]})
    outcome = extract_facts(llm, turns, speakers=["Maya", "Leo"])
    assert outcome.fallback is None and outcome.attempts == 2 and outcome.output.facts[0].text == "Maya lives in Porto"
    assert "third person" in str(llm.calls[1][-1].content)
    llm = ScriptedChatModel(
        routes={"You are the fact extractor": [first_person, {"facts": [{"text": "x", "turn_ids": ["D9:9"]}]}]}
    )
    outcome = extract_facts(llm, turns, speakers=["Maya", "Leo"])
    assert outcome.fallback is not None and outcome.output.facts[0].text == "Maya live in Porto."  # verbs left as said


def test_deterministic_manager_add_noop_update() -> None:
    memory = seeded_memory()
    new = cands("Maya lives in Lisbon now.", "leo likes sushi", "Ana is Maya's sister.", "Leo likes sushi a lot.")
    assert fact_key("Maya lives in Lisbon now.") == fact_key("Maya lives in Porto.") == ("maya", "live")
    edits = heuristic_edits(memory, new)
    by_fact = {e.fact: e for e in edits}
    assert (by_fact[0].op, by_fact[0].id) == ("UPDATE", "F1")
    assert (by_fact[1].op, by_fact[1].id) == ("NOOP", "F2")  # exact duplicate of F2
    assert by_fact[2].op == "ADD"
    assert by_fact[3].op == "NOOP"  # near-duplicate of F2
    assert memory.validate(edits, new) == []


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), temperature=st.floats(0.05, 5.0))
def test_sampled_edits_always_validate(seed: int, temperature: float) -> None:
    memory = seeded_memory()
    new = cands(
        "Maya lives in Lisbon.", "Leo likes sushi.", "Maya lives in Lisbon.", "Leo ran 15 km.", "Maya works day shifts."
    )
    edits = sample_edits(memory, new, rng=random.Random(seed), temperature=temperature)
    assert memory.validate(edits, new) == []
    memory.apply(edits, new)


def test_sampling_emulates_temperature() -> None:
    memory = seeded_memory()
    new = cands("Maya lives in Lisbon.", "Leo ran 15 km.", "Maya works day shifts.")
    greedy = heuristic_edits(memory, new)
    cold = {tuple(sample_edits(memory, new, rng=random.Random(s), temperature=0.05)) for s in range(20)}
    hot = {tuple(sample_edits(memory, new, rng=random.Random(s), temperature=5.0)) for s in range(20)}
    assert cold == {tuple(greedy)}
    assert len(hot) > 3


def test_llm_manager_invalid_batch_is_retried_then_skipped_and_recorded() -> None:
    memory = seeded_memory()
    before = memory.to_json()
    turns = [RawTurn(dia_id="D2:1", speaker="Maya", text="I moved to Lisbon.")]
    extraction = {"facts": [{"text": "Maya lives in Lisbon", "turn_ids": ["D2:1"]}]}
    bad = {"edits": [{"op": "UPDATE", "fact": 0, "id": "F99"}]}
    llm = ScriptedChatModel(
        routes={"You are the fact extractor": [extraction], "You are the memory manager": [bad, bad]}
    )
    update = update_fact_memory(llm, memory, turns, session_id="S2")
    assert update.manager.skipped and update.report is None and "skipped" in update.skipped_reason
    assert update.manager.attempts == 2 and update.cost.llm_calls == 3
    assert any("F99" in e for e in update.manager.fallback.errors)
    assert memory.to_json() == before

    good = {"edits": [{"op": "UPDATE", "fact": 0, "id": "F1", "text": "Maya lives in Lisbon"}]}
    llm = ScriptedChatModel(
        routes={"You are the fact extractor": [extraction], "You are the memory manager": [bad, good]}
    )
    update = update_fact_memory(llm, memory, turns, session_id="S2")
    assert not update.manager.skipped and update.report.updated == ["F1"]
    assert memory.get("F1").history[0].text == "Maya lives in Porto."

    fallback = manage_memory(
        ScriptedChatModel(replies=[bad, bad]), memory, cands("Ana visits Maya."), on_invalid="fallback"
    )
    assert not fallback.skipped and fallback.fallback is not None and [e.op for e in fallback.edits] == ["ADD"]


# -- LoGo-GRPO: rewards, advantages, curriculum ---------------------------------------------------


def test_compression_penalty_is_normalized_by_extracted_facts() -> None:
    assert compression_penalty(0, 40) == 0.0
    assert compression_penalty(40, 40) == pytest.approx(0.3)
    assert compression_penalty(10, 40) == pytest.approx(0.075)
    assert compression_penalty(80, 40) == pytest.approx(0.3)  # clamped
    assert compression_penalty(5, 0) == 0.0
    assert compression_penalty(20, 40, weight=1.0) == pytest.approx(0.5)


def test_reward_is_f1_minus_penalty() -> None:
    memory = seeded_memory()
    qa = [
        QAItem(question_id="q1", question="Where does Maya live?", answer="Porto", category=4),
        QAItem(question_id="q2", question="What does Leo like?", answer="sushi", category=4),
    ]
    perfect = score_memory(
        memory, qa, normalizer=6, weight=0.3, answer=lambda q, m: "Porto" if "Maya" in q else "sushi"
    )
    assert perfect.f1 == pytest.approx(1.0) and perfect.penalty == pytest.approx(0.15)
    assert perfect.reward == pytest.approx(0.85)
    half = score_memory(memory, qa, normalizer=6, weight=0.3, answer=lambda q, m: "Porto")
    assert half.f1 == pytest.approx(0.5) and half.reward == pytest.approx(0.35)
    assert score_memory(memory, [], normalizer=6, weight=0.3, answer=lambda q, m: "").reward == pytest.approx(-0.15)


def test_group_advantages_on_hand_made_rewards() -> None:
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == pytest.approx([0.8659, -0.8659, -0.8659, 0.8659], abs=1e-3)
    assert group_advantages([0.4, 0.4, 0.4]) == [0.0, 0.0, 0.0]
    assert group_advantages([0.7]) == [0.0]
    assert group_advantages([]) == []
    rewards = [0.12, -0.3, 0.55, 0.05, 0.2]
    adv = group_advantages(rewards, eps=0.0)
    n = len(adv)
    assert sum(adv) == pytest.approx(0.0, abs=1e-9)
    assert (sum(a * a for a in adv) / (n - 1)) ** 0.5 == pytest.approx(1.0)  # unit unbiased std
    assert adv.index(max(adv)) == rewards.index(max(rewards))
    # Scale-free: multiplying rewards by 10 leaves the advantages (nearly) unchanged.
    assert group_advantages([10 * r for r in rewards]) == pytest.approx(group_advantages(rewards), abs=1e-3)


def test_curriculum_schedule() -> None:
    assert curriculum_horizons(40) == [8, 16, 32]
    assert curriculum_horizons(32) == [8, 16, 32]
    assert curriculum_horizons(20) == [8, 16, 20]
    assert curriculum_horizons(16) == [8, 16]
    assert curriculum_horizons(5) == [5]
    assert curriculum_horizons(5, stages=(2, 4)) == [2, 4]
    assert curriculum_horizons(0) == []
    assert local_session_points(5, 4) == [0, 1, 3, 4]
    assert local_session_points(3, 8) == [0, 1, 2]
    assert local_session_points(10, 1) == [9]


@pytest.fixture(scope="module")
def built(sample):
    return build_logo_grpo_dataset(sample, config=LoGoConfig(group_size=4, local_points=3, seed=7))


def test_dataset_groups_and_advantages(built) -> None:
    rows, stats = built.rows, built.stats
    assert stats.rollouts_global == 4 and stats.rollouts_local == 12 and stats.llm_calls == 0
    assert stats.groups_global == 1 and stats.groups_local == 3 and stats.rows == len(rows)
    members: dict[str, dict[int, float]] = defaultdict(dict)
    for row in rows:
        assert set(row) >= {"prompt", "completion", "advantage", "group_id", "level"}
        assert row["prompt"][0]["role"] == "system" and row["completion"][0]["role"] == "assistant"
        assert row["reward"] == pytest.approx(row["f1"] - row["penalty"])
        prior = members[row["group_id"]].setdefault(row["member"], row["advantage"])
        assert prior == row["advantage"]  # every step of a rollout carries the rollout's advantage
    by_group: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_group[row["group_id"]].append(row)
    levels = {g: {r["level"] for r in rs} for g, rs in by_group.items()}
    assert sorted(levels.values(), key=str).count({"global"}) == 1
    for group, group_rows in by_group.items():
        per_member = {r["member"]: r["reward"] for r in group_rows}
        expected = group_advantages([per_member[m] for m in sorted(per_member)])
        assert [members[group][m] for m in sorted(per_member)] == pytest.approx(expected)
        if levels[group] == {"local"}:
            # a local group: G alternative edit lists for one session, from one identical snapshot
            assert len(group_rows) == 4
            assert len({json.dumps(r["prompt"]) for r in group_rows}) == 1
            assert len({r["state"] for r in group_rows}) == 1
            assert len({r["session_index"] for r in group_rows}) == 1
    global_rows = [r for r in rows if r["level"] == "global"]
    assert {r["session_index"] for r in global_rows} == set(range(5))
    assert len({r["reward"] for r in rows}) > 1, "groups need reward variance"


def test_dataset_is_reproducible(sample, built) -> None:
    again = build_logo_grpo_dataset(sample, config=LoGoConfig(group_size=4, local_points=3, seed=7))
    assert [r["completion"] for r in again.rows] == [r["completion"] for r in built.rows]
    other = build_logo_grpo_dataset(sample, config=LoGoConfig(group_size=4, local_points=3, seed=8))
    assert [r["completion"] for r in other.rows] != [r["completion"] for r in built.rows]


def test_curriculum_dataset_respects_horizons(sample) -> None:
    data = build_logo_grpo_dataset(
        sample, config=LoGoConfig(group_size=2, curriculum=True, curriculum_stages=(2, 4), local_points=2)
    )
    assert data.stats.horizons == [2, 4]
    for row in data.rows:
        assert row["session_index"] < row["horizon"]
        assert row["stage"] == [2, 4].index(row["horizon"])
    short = [r for r in data.rows if r["horizon"] == 2 and r["level"] == "global"]
    normalizer = sum(len(json.loads(r["candidates"])) for r in short if r["member"] == 0)
    assert normalizer == 15  # facts of sessions 1-2: the horizon's penalty normalizer
    assert all(r["penalty"] == pytest.approx(compression_penalty(r["memory_size"], 15)) for r in short)


def test_reward_hook_recomputes_local_rewards(built, tmp_path) -> None:
    rows_path, context_path = write_dataset(built, tmp_path / "train.jsonl")
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    assert len(rows) == built.stats.rows
    hook = LoGoRewardHook(context_path)
    local = [r for r in rows if r["level"] == "local"][:6]
    columns = {key: [r[key] for r in local] for key in ("state", "candidates", "session_index", "horizon")}
    rewards = hook(prompts=[r["prompt"] for r in local], completions=[r["completion"] for r in local], **columns)
    assert rewards == pytest.approx([r["reward"] for r in local])
    broken = [
        [{"role": "assistant", "content": '{"edits": [{"op": "DELETE", "fact": 0, "id": "F999"}]}'}],
        [{"role": "assistant", "content": "no json"}],
    ]
    assert hook(completions=broken, **{k: v[:2] for k, v in columns.items()}) == [-1.0, -1.0]


def test_cli_train_data(sample_path, tmp_path, capsys) -> None:
    from logicmap.__main__ import main

    out = tmp_path / "ds.jsonl"
    assert (
        main(["train-data", str(sample_path), "--out", str(out), "--group-size", "2", "--curriculum", "--show", "1"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "rollouts 10 (2 global, 8 local" in printed and "LLM calls 0" in printed
    assert out.exists() and (tmp_path / "ds.context.json").exists()
    assert all(json.loads(line)["level"] in ("global", "local") for line in out.read_text().splitlines())
