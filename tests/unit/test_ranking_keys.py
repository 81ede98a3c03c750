"""The reranker's extra keys (memory.ranking_keys): facts, sessions, feedback, bridges, dates, session diversity."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.text import query_readings
from logicmap.memory.records.records import Event, Fact, Turn
from logicmap.memory.retrieval.ranking import ALL_FEATURES, FEATURES, TurnRanker, default_ranker, turn_features
from logicmap.memory.retrieval.ranking_keys import CANDIDATE_FEATURES, diversified_rows, diversify, gathers
from logicmap.memory.store import ChangeSet

SESSIONS = {
    "S1": (
        datetime(2023, 5, 8),
        [
            ("Ada", "I started pottery classes with Bruno last week."),
            ("Kim", "That sounds relaxing."),
            ("Ada", "The weather was awful all weekend."),
        ],
    ),
    "S2": (
        datetime(2023, 7, 2),
        [
            ("Kim", "Did you finish a bowl?"),
            ("Ada", "My teacher Bruno fired my first bowl in the kiln yesterday."),
            ("Kim", "I adopted a puppy."),
        ],
    ),
}


def _commit(resources, namespace: str = "keys") -> None:
    turns, events = [], []
    for s, (when, lines) in SESSIONS.items():
        ids = []
        for speaker, text in lines:
            dia_id = f"D{s[1]}:{len(ids) + 1}"
            turns.append(
                Turn(
                    namespace=namespace,
                    session_id=s,
                    dia_id=dia_id,
                    speaker=speaker,
                    text=text,
                    session_time=when,
                    position=len(turns),
                )
            )
            ids.append(dia_id)
        events.append(
            Event(
                id=f"E{s}",
                namespace=namespace,
                session_id=s,
                order=len(events),
                turn_ids=ids,
                summary=" ".join(t for _, t in lines),
            )
        )
    fact = Fact(id="F1", namespace=namespace, head="Ada", relation="takes", tail="pottery classes", turn_ids=["D1:1"])
    emb = resources.embeddings
    resources.store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=0,
            turns=turns,
            turn_vectors=emb.embed_documents([t.render() for t in turns]),
            events=events,
            event_vectors=emb.embed_documents([e.summary for e in events]),
            facts=[fact],
            fact_vectors=emb.embed_documents(["Ada takes pottery classes"]),
        )
    )


def _rows(resources, question: str) -> dict[str, dict[str, float]]:
    snapshot = resources.store.snapshot("keys")
    readings = normalize(np.asarray(resources.embeddings.embed_documents(query_readings(question)), dtype=np.float32))
    features = turn_features(snapshot, question, readings, ALL_FEATURES)
    assert features.names == ALL_FEATURES and features.matrix.shape == (6, len(ALL_FEATURES))
    return {t: dict(zip(ALL_FEATURES, row)) for t, row in zip(features.turn_ids, features.matrix)}


def test_facts_are_extra_keys_of_the_turns_they_come_from(resources) -> None:
    _commit(resources)
    rows = _rows(resources, "What classes does Ada take?")
    assert rows["D1:1"]["fact_key"] > 0.3  # the fact "Ada takes pottery classes" cites D1:1
    assert all(rows[t]["fact_key"] == 0 for t in rows if t != "D1:1")


def test_a_turn_carries_its_sessions_best_match(resources) -> None:
    _commit(resources)
    rows = _rows(resources, "Did Bruno fire a bowl in the kiln?")
    s2 = [rows[t] for t in ("D2:1", "D2:2", "D2:3")]
    assert len({r["session_own"] for r in s2}) == 1 and s2[0]["session_own"] == max(r["own"] for r in s2)
    assert s2[0]["session_bm25"] == 1.0 > rows["D1:2"]["session_bm25"]  # the session holding the kiln wins
    assert rows["D2:3"]["prf"] < rows["D2:2"]["prf"]  # feedback from the best turns favours the bowl turn


def test_an_entity_bridges_sessions_and_a_stated_date_picks_its_sessions(resources) -> None:
    _commit(resources)
    rows = _rows(resources, "What did Ada do with Bruno in May 2023?")
    assert rows["D1:1"]["bridge"] == rows["D2:2"]["bridge"] == 1.0  # both name Bruno, in two sessions
    assert rows["D1:2"]["bridge"] == 0.0
    assert [rows[t]["time_match"] for t in sorted(rows)] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert not any(r["time_match"] for r in _rows(resources, "What did Ada do with Bruno?").values())


def test_stemmed_lexical_keys_match_an_inflected_verb(resources) -> None:
    # Issue 41, item 3: "start" finds "I started pottery classes", which plain BM25 (light plural strip) misses;
    # the turn's, its window's and its session's stemmed BM25 rank it first, the unstemmed keys do not.
    _commit(resources)
    rows = _rows(resources, "What did Ada start?")
    assert rows["D1:1"]["bm25_stem"] == 1.0 > max(rows[t]["bm25_stem"] for t in rows if t != "D1:1")
    assert rows["D1:1"]["bm25"] < 1.0  # unstemmed, only "Ada" matches, and a shorter turn of hers ranks first
    held = [rows[t]["window_stem"] for t in ("D1:1", "D1:2")]  # the windows that hold D1:1
    assert max(held) == 1.0 and min(held) > max(rows[t]["window_stem"] for t in ("D1:3", "D2:1", "D2:2", "D2:3"))
    assert rows["D1:2"]["session_stem"] == 1.0 > rows["D2:2"]["session_stem"]
    assert rows["D1:1"]["session_bm25"] == rows["D2:2"]["session_bm25"]


def test_session_diversity_takes_turns_of_more_sessions_first() -> None:
    scores, sessions = np.array([5.0, 4.0, 3.0, 2.0, 1.0]), np.array([0, 0, 1, 1, 2])
    assert diversified_rows(scores, sessions, 0.0, 3) == [0, 1, 2]
    assert diversified_rows(scores, sessions, 2.0, 3) == [0, 2, 1]  # the second turn of session 0 waits
    reordered = diversify(scores, sessions, 2.0, 3)
    assert list(np.argsort(-reordered, kind="stable")) == [0, 2, 1, 3, 4]


def test_a_question_that_gathers_over_the_conversation_is_recognised() -> None:
    # Issue 41, item 3: a present perfect with a named subject, "both" and "how many" gather their answer over
    # the conversation (multi-hop); a past tense, "how long has" (one duration) and "have" as a main verb do not.
    for question in (
        "What books has Tim read?",
        "Which cities have John and Jean visited?",
        "Did Jon and Gina both take part in dance competitions?",
        "How many games has John mentioned winning?",
        "Both of them like what animal?",
    ):
        assert gathers(question), question
    for question in (
        "What book did Tim read?",
        "How long has Caroline had her current group of friends?",
        "What do Melanie's kids have in common?",
        "When has the party been planned?",
        "Where did Caroline move from 4 years ago?",
    ):
        assert not gathers(question), question


def test_a_gathering_question_takes_its_first_turns_from_more_sessions(resources) -> None:
    # A ranker whose score is the session's lexical match puts every turn of the kiln session first. With a
    # gathering weight, a gathering question ("has Ada") takes its second turn from the other session; a question
    # that does not gather keeps the order by score, and so does a ranker without the weight.
    _commit(resources)
    snapshot = resources.store.snapshot("keys")

    def order(ranker: TurnRanker, question: str) -> list[str]:
        readings = normalize(
            np.asarray(resources.embeddings.embed_documents(query_readings(question)), dtype=np.float32)
        )
        scores = ranker.scores(snapshot, question, readings)
        return sorted(scores, key=lambda t: -scores[t])

    plain = TurnRanker((10.0, 1.0), names=("session_bm25", "own"))
    gathering = TurnRanker((10.0, 1.0), names=("session_bm25", "own"), gather_diversity=20.0)
    assert gathering.diversity("What has Ada fired in the kiln?") == 20.0
    assert gathering.diversity("What did Ada fire in the kiln?") == plain.diversity("What has Ada fired?") == 0.0
    asked = "What has Ada fired in the kiln?"
    assert [t[:2] for t in order(plain, asked)[:3]] == ["D2", "D2", "D2"]
    assert [t[:2] for t in order(gathering, asked)[:2]] == ["D2", "D1"]
    told = "What did Ada fire in the kiln?"
    assert order(gathering, told) == order(plain, told)
    assert default_ranker().gather_diversity > 0 == default_ranker().session_diversity


def test_a_ranker_names_its_features_and_the_shipped_one_covers_them(resources) -> None:
    from logicmap.memory.retrieval import turn_ranker_weights

    _commit(resources)
    assert set(turn_ranker_weights.COEFFICIENTS) == set(FEATURES) and set(FEATURES) <= set(ALL_FEATURES)
    assert set(CANDIDATE_FEATURES) <= set(ALL_FEATURES)
    with pytest.raises(ValueError, match="unknown ranker features"):
        TurnRanker((1.0,), names=("shoe_size",))
    with pytest.raises(ValueError, match="2 coefficients"):
        TurnRanker((1.0,), names=("own", "fact_key"))
    snapshot = resources.store.snapshot("keys")
    question = "What classes does Ada take?"
    readings = normalize(np.asarray(resources.embeddings.embed_documents(query_readings(question)), dtype=np.float32))
    facts_only = TurnRanker((1.0,), names=("fact_key",)).scores(snapshot, question, readings)
    assert max(facts_only, key=facts_only.get) == "D1:1"
    shipped = default_ranker().scores(snapshot, question, readings)
    assert set(shipped) == set(snapshot.turns)
    # The question's context (each feature's best value over its turns) adds one term to every turn alike: the
    # fitted logit, never a different order (the shipped ranker has it: evals/loco.py fits with it).
    with pytest.raises(ValueError, match="context needs"):
        TurnRanker((1.0,), names=("own",), context=(1.0, 2.0))
    plain = TurnRanker((1.0, 2.0), names=("own", "bm25")).scores(snapshot, question, readings)
    framed = TurnRanker((1.0, 2.0), names=("own", "bm25"), context=(0.5, -3.0)).scores(snapshot, question, readings)
    best = turn_features(snapshot, question, readings, ("own", "bm25")).matrix.max(axis=0)
    assert all(abs(framed[t] - plain[t] - (0.5 * best[0] - 3.0 * best[1])) < 1e-9 for t in plain)
    assert len(default_ranker().context) == len(FEATURES) and set(turn_ranker_weights.CONTEXT) == set(FEATURES)
