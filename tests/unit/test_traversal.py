"""The second hop of the no-LLM search (memory.traversal): from the ranker's best turns along the event graph."""

from __future__ import annotations

import numpy as np
import pytest

from logicmap.graphs.strategies.compass import answer
from logicmap.memory.records.records import Cue, Event, Relation, Tag, Turn
from logicmap.memory.store import ChangeSet

QUESTION = "Who paced Sam in the half marathon, and what role will he have at Sam's wedding?"
ANSWER = "D1:18"  # "If he isn't too busy being best man." shares no word with the question
# event id -> (session, turns); the race event is what the ranker finds first, plans is one relation away.
EVENTS = {
    "race": (
        "S1",
        [
            ("Sam", "Dev paced me in the half marathon, the first ten miles."),
            ("Priya", "Sam, that is a great half marathon time!"),
        ],
    ),
    **{
        f"chat{i}": ("S1", [("Priya", text)])
        for i, text in enumerate(
            [
                "Our whole office moved into a new building downtown last week.",
                "The weather has been grey, wet and cold for the entire week.",
                "I finally repainted the long hallway a pale shade of green.",
                "My neighbour keeps three hives of bees in her back garden now.",
                "We are seriously thinking about getting a second cat this autumn.",
                "The new bakery on the corner makes excellent dark rye loaves.",
                "I tried a pottery class on Tuesday and made a wobbly bowl.",
                "My younger brother started a new job down at the harbour.",
                "The public library is closed for repairs until early next spring.",
                "We watched a very long documentary about melting glaciers on Friday.",
                "My phone screen cracked badly when it fell out in the car.",
                "The morning train into town was forty minutes late again today.",
                "I have been reading a thick novel about a lighthouse keeper's family.",
                "Our street is getting new trees planted along both of the pavements.",
            ]
        )
    },
    "plans": (
        "S1",
        [("Priya", "Dev will pace you next spring too."), ("Priya", "If he isn't too busy being best man.")],
    ),
}


def _commit(resources, namespace: str) -> None:
    turns, events = [], []
    for order, (eid, (session, lines)) in enumerate(EVENTS.items()):
        ids = []
        for speaker, text in lines:
            dia_id = f"D1:{len(turns) + 1}"
            turns.append(
                Turn(
                    namespace=namespace,
                    session_id=session,
                    dia_id=dia_id,
                    speaker=speaker,
                    text=text,
                    position=len(turns),
                )
            )
            ids.append(dia_id)
        events.append(
            Event(
                id=eid,
                namespace=namespace,
                session_id=session,
                order=order,
                participants=["Sam", "Priya"],
                turn_ids=ids,
                summary=" ".join(f"{s}: {t}" for s, t in lines),
            )
        )
    emb = resources.embeddings
    relation = Relation(id="r1", namespace=namespace, source="race", target="plans", label="shared_participant")
    cue = Cue(id="cue:dev", namespace=namespace, text="Dev", kind="person")
    tags = [Tag(id=f"t{e}", namespace=namespace, cue_id=cue.id, tag="person", target_id=e) for e in ("race", "plans")]
    resources.store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=0,
            turns=turns,
            turn_vectors=emb.embed_documents([t.render() for t in turns]),
            events=events,
            event_vectors=emb.embed_documents([e.summary for e in events]),
            relations=[relation],
            cues=[cue],
            cue_vectors=emb.embed_documents([cue.text]),
            tags=tags,
        )
    )


def test_the_second_hop_finds_an_answer_that_shares_no_word_with_the_question(resources) -> None:
    _commit(resources, "hop")
    ranker = answer(QUESTION, "hop", resources=resources, policy="heuristic")
    both = answer(QUESTION, "hop", resources=resources, policy="heuristic", traversal=True)
    assert ranker.cost.llm_calls == both.cost.llm_calls == 0
    assert "D1:1" in ranker.cited_turns(10) and "D1:1" in both.cited_turns(10)  # the first hop: Dev paced Sam
    # The ranker alone reaches it late in the ten at best (8th: its session and window keys, memory.ranking_keys);
    # the traversal ranks it higher: race -> plans, the event that names Dev again.
    alone = ranker.cited_turns(10).index(ANSWER) if ANSWER in ranker.cited_turns(10) else 10
    assert alone >= 7 and both.cited_turns(10).index(ANSWER) < alone


def test_hop_features_say_how_the_traversal_reached_each_turn(resources) -> None:
    from logicmap.memory.retrieval.ranking import BASE_FEATURES
    from logicmap.memory.retrieval.traversal import HOP_FEATURES, TraversalRanker, hop_features

    _commit(resources, "feat")
    snapshot = resources.store.snapshot("feat")
    ids = sorted(snapshot.turns, key=lambda t: snapshot.turns[t].position)
    first = np.zeros(len(ids))
    first[ids.index("D1:1")] = 1.0  # the race turn is the first hop's best
    hops = {t: dict(zip(HOP_FEATURES, row)) for t, row in zip(ids, hop_features(snapshot, QUESTION, first))}
    assert hops["D1:1"]["seed"] == 1 and hops[ANSWER]["seed"] == 0
    assert hops[ANSWER]["related_event"] == 1 and hops["D1:3"]["related_event"] == 0  # race -> plans only
    assert hops["D1:17"]["bridge_turn"] > 0 and hops[ANSWER]["bridge_neighbour"] > 0  # "Dev" is not in the question
    assert hops[ANSWER]["bridge_event"] > 0 and hops["D1:3"]["bridge_event"] == 0
    with pytest.raises(ValueError, match=f"{len(BASE_FEATURES) + len(HOP_FEATURES)} coefficients"):
        TraversalRanker((1.0,))


def test_bench_recall_prints_the_ablation_against_the_better_baseline(capsys) -> None:
    from logicmap.evals.bench.bench_recall import ablation_tables

    def row(overall: float, multi_hop: float) -> dict:
        return {
            "recall": {10: overall},
            "categories": {"1 multi-hop": multi_hop},
            "category_counts": {"1 multi-hop": 4},
        }

    rows = {
        "dense": row(0.5, 0.25),
        "bm25": row(0.6, 0.5),
        "compass": row(0.7, 0.5),
        "compass:similarity": row(0.4, 0.25),
        "compass:traversal": row(0.8, 0.75),
    }
    ablation_tables({"a.json": {"questions": 4, "rows": rows}})
    printed = capsys.readouterr().out
    assert "| a.json | 4 | 0.600 | 0.700 (+0.100) | 0.400 (-0.200) | 0.800 (+0.200) |" in printed
    assert "| 1 multi-hop | 4 | 0.500 | 0.500 (+0.000) | 0.250 (-0.250) | 0.750 (+0.250) |" in printed
