"""Store items and conversations live in one namespace without loss (issue 37 item 4).

Generated mixes (hypothesis, derandomized) of ``LogicMapStore`` puts (text and ``messages`` values), deletes,
``forget(keys=...)``, ``add_messages`` (what the chatbot stores a turn with), file ingests (JSONL) and forgets of a
conversation's turn, on one namespace whichever of them created it, each checked against a model of what every API
must return: ``get`` each key's last value (None once deleted), ``search`` every live key, ``forget(keys=...)``
refuses exactly the keys not live, a second put of a key replaces it, and the turns recall may return
(``recall_turn_ids``, what ``answer()`` cites) are exactly the live statements: a text item's text, the user's
statements of a ``messages`` value and of ``add_messages`` (never its questions or the assistant's replies), every
line of a file. At the end ``answer("bm25", ...)`` for each marker word cites its turn when live, never when gone.
Before the fix a put into a namespace the chat or a file created was stored under another session id: ``get``
None, ``search`` [], a second put ``SessionConflictError``, ``delete`` a no-op, yet recalled.
``LOGICMAP_FUZZ_EXAMPLES=N`` runs N cases.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from logicmap.graphs.chat.messages import add_messages
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import answer
from logicmap.graphs.surfaces.basestore import LogicMapStore
from logicmap.graphs.writes.forget import UnknownMemoryError, forget
from logicmap.memory.records.chat_turns import recall_turn_ids
from tests.reliability.support import memory_problems

CASES = int(os.environ.get("LOGICMAP_FUZZ_EXAMPLES", "0")) or 10
KEYS = ("k0", "k1", "k2")
_namespaces = itertools.count()

OPS = st.one_of(
    st.tuples(st.sampled_from(["put", "put messages", "delete", "forget key"]), st.sampled_from(KEYS)),
    st.tuples(st.sampled_from(["chat", "file", "forget turn"]), st.integers(0, 3)),
)


@dataclass
class Model:
    """What the namespace must hold: each live key's value and statements, and the conversations' statements."""

    items: dict[str, tuple[dict[str, Any], set[str]]] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)  # live statements of chat messages and files, in order
    gone: set[str] = field(default_factory=set)  # marker words whose statement was deleted, replaced or forgotten
    live: dict[str, str] = field(default_factory=dict)  # marker word -> its live statement

    def evidence(self) -> set[str]:
        return {text for _, texts in self.items.values() for text in texts} | set(self.said)

    def retire(self, texts: set[str] | list[str]) -> None:
        for word, text in list(self.live.items()):
            if text in texts:
                self.gone.add(word)
                del self.live[word]


class Run:
    """One generated case: the real APIs on one namespace, and the model beside them."""

    def __init__(self, res: Resources, tmp: Path) -> None:
        self.res, self.tmp = res, tmp
        self.store = LogicMapStore(resources=res, policy="heuristic", consolidation="sync")
        self.ns = ("mix", f"u{next(_namespaces)}")
        self.name = ".".join(self.ns)
        self.model = Model()
        self.words = itertools.count()
        self.trace: list[str] = []

    def word(self) -> str:
        return f"zq{next(self.words)}marker"

    def statement(self, text: str, word: str) -> str:
        self.model.live[word] = text
        return text

    def step(self, op: str, arg: Any) -> None:
        self.trace.append(f"{op} {arg}")
        getattr(self, "_" + op.replace(" ", "_"))(arg)
        self.check()

    # -- the operations -------------------------------------------------------------------------------------

    def _put(self, key: str) -> None:
        w = self.word()
        value = {"content": self.statement(f"I keep a {w} in my garden.", w)}
        self.store.put(self.ns, key, value)
        self._replace(key, value, {value["content"]})

    def _put_messages(self, key: str) -> None:
        w, q, r = self.word(), self.word(), self.word()
        said = self.statement(f"My sister moved to {w} last year.", w)
        value = {
            "messages": [
                {"role": "user", "content": said},
                {"role": "user", "content": f"Where is {q}?"},
                {"role": "assistant", "content": f"You probably live in {r}, near the canal."},
            ]
        }
        self.store.put(self.ns, key, value)
        self.model.gone |= {q, r}  # a question and a model reply are never recalled
        self._replace(key, value, {said})

    def _replace(self, key: str, value: dict[str, Any], texts: set[str]) -> None:
        old = self.model.items.get(key)
        if old is not None:
            self.model.retire(old[1])
        self.model.items[key] = (value, texts)

    def _delete(self, key: str) -> None:
        self.store.delete(self.ns, key)
        self._drop(key)

    def _forget_key(self, key: str) -> None:
        if key in self.model.items:
            forget(self.name, keys=[key], resources=self.res)
            self._drop(key)
        else:
            with pytest.raises(UnknownMemoryError, match="holds no such key"):
                forget(self.name, keys=[key], resources=self.res)

    def _drop(self, key: str) -> None:
        old = self.model.items.pop(key, None)
        if old is not None:
            self.model.retire(old[1])

    def _chat(self, _: int) -> None:
        w, q, r = self.word(), self.word(), self.word()
        said = self.statement(f"I adopted a parrot called {w}.", w)
        add_messages(
            self.name,
            [
                {"role": "user", "content": said},
                {"role": "user", "content": f"Do you remember {q}?"},
                {"role": "assistant", "content": f"Your parrot is surely {r}."},
            ],
            resources=self.res,
            policy="heuristic",
        )
        self.model.gone |= {q, r}
        self.model.said.append(said)

    def _file(self, n: int) -> None:
        lines = [self.statement(f"We hiked to {w} on Sunday.", w) for w in (self.word(), self.word())]
        path = self.tmp / f"file{next(self.words)}-{n}.jsonl"
        path.write_text("".join(json.dumps({"speaker": "Alice", "text": t}) + "\n" for t in lines))
        ingest_conversation(path, self.name, resources=self.res, policy="heuristic", append=True)
        self.model.said.extend(lines)

    def _forget_turn(self, n: int) -> None:
        if not self.model.said:
            return
        text = self.model.said.pop(n % len(self.model.said))
        snap = self.res.store.snapshot(self.name)
        [tid] = [tid for tid, t in snap.turns.items() if t.text == text]
        forget(self.name, turn_ids=[tid], resources=self.res)
        self.model.retire([text])

    # -- what every API must return -------------------------------------------------------------------------

    def check(self) -> None:
        where = " after " + " ; ".join(self.trace)
        for key in KEYS:
            got = self.store.get(self.ns, key)
            want = self.model.items.get(key)
            assert (got.value if got else None) == (want[0] if want else None), f"get {key}{where}"
        listed = sorted(i.key for i in self.store.search(self.ns, limit=50))
        assert listed == sorted(self.model.items), f"search{where}"
        if not self.res.store.has_namespace(self.name):
            assert not self.model.evidence(), where
            return
        snap = self.res.store.snapshot(self.name)
        recall = sorted(snap.turns[t].text for t in recall_turn_ids(snap))
        assert recall == sorted(self.model.evidence()), f"recallable turns{where}"
        assert memory_problems(snap) == [], where

    def check_answers(self) -> None:
        if not self.res.store.has_namespace(self.name):
            return
        snap = self.res.store.snapshot(self.name)
        recallable = set(recall_turn_ids(snap))
        for word in sorted(self.model.live.keys() | self.model.gone):
            result = answer("bm25", f"What about {word}?", self.name, resources=self.res, policy="heuristic")
            cited = [t for e in result.evidence for t in e.turn_ids]
            assert set(cited) <= recallable, f"{word}: cites {cited} beyond the recallable turns"
            texts = [snap.turns[t].text for t in cited]
            if word in self.model.live:
                assert self.model.live[word] in texts, f"{word} is live but not recalled"
            else:
                assert not [t for t in texts if word in t], f"{word} is gone but recalled: {texts}"


@settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(first=st.sampled_from(["chat", "file", "put"]), ops=st.lists(OPS, min_size=2, max_size=6))
@example(
    first="chat",
    ops=[
        ("put", "k0"),
        ("put", "k0"),
        ("delete", "k0"),
        ("put messages", "k1"),
        ("forget key", "k1"),
        ("forget key", "k1"),
    ],
)
@example(
    first="file",
    ops=[("put", "k0"), ("chat", 0), ("forget turn", 1), ("put messages", "k0"), ("file", 1), ("delete", "k0")],
)
@example(first="put", ops=[("chat", 0), ("file", 0), ("put", "k1"), ("forget turn", 0), ("forget key", "k0")])
def test_items_and_conversations_share_a_namespace(
    resources: Resources, tmp_path: Path, first: str, ops: list[tuple[str, Any]]
) -> None:
    run = Run(resources, tmp_path)
    run.step(first, "k0" if first == "put" else 0)
    for op, arg in ops:
        run.step(op, arg)
    run.check_answers()


def test_a_write_after_a_forget_takes_a_position_after_every_kept_turn(resources: Resources) -> None:
    """Turn positions order a namespace (the chat's open session is its last turn's): a write after a forget must
    not reuse a kept turn's position (it took the count of turns before the fix, which a forget lowers)."""
    add_messages(
        "mix.pos",
        [{"role": "user", "content": t} for t in ("I like tea.", "I like jazz.", "I like chess.")],
        resources=resources,
        policy="heuristic",
    )
    snap = resources.store.snapshot("mix.pos")
    [first] = [tid for tid, t in snap.turns.items() if t.text == "I like tea."]
    forget("mix.pos", turn_ids=[first], resources=resources)
    LogicMapStore(resources=resources, policy="heuristic", consolidation="sync").put(
        ("mix", "pos"), "k", {"content": "I like go."}
    )
    turns = resources.store.snapshot("mix.pos").turns.values()
    positions = sorted((t.position, t.text) for t in turns)
    assert len({p for p, _ in positions}) == len(positions), positions
    assert positions[-1][1] == "I like go."
