"""Turn identity and namespace sources: no write replaces a stored turn of another session, and a
many-conversation file never writes into a namespace that another source created.

Generated cases (seeded, so failures reproduce): a namespace gets several "files" whose sessions reuse
dia ids from a small pool, through every path that writes turns (the CLI on LoCoMo files, the
``ingest_conversation`` API, the chatbot's ``ingest_session``, the remember tool). After each file every
turn of every committed session must still be there with its text, events must cite turns of their own
sessions, and a turn stored under another id than its dia id must have been forced to (another session
holds the dia id). A file that repeats a dia id inside itself is refused with nothing written. Then
many-conversation files are ingested with ``-n acme`` where some ``acme.<conversation>`` namespaces
already exist, made by the chat, by another conversation, by a Python caller, by an older LogicMap (no
source recorded), or by the same conversation: the file is refused as a whole, before any write,
exactly when one of them belongs to another source. ``LOGICMAP_FUZZ_EXAMPLES=N`` runs N cases of each.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logicmap.graphs.chat.chatbot import ingest_session, session_ingester
from logicmap.graphs.ingest.ingest import (
    IngestContext,
    NamespaceSourceError,
    commit,
    conversation_source,
    file_namespaces,
    foreign_sessions,
    fuse,
    ingest_conversation,
    prepare,
    rebase,
    relate,
    route_after_commit,
    segment,
    topics,
)
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.loaders import Conversation, RawTurn, Session, conversation_namespace, load_conversations
from logicmap.memory.records.records import SessionInfo, Turn
from logicmap.memory.store import ChangeSet, TurnIdConflictError
from logicmap.tools import create_remember_tool
from logicmap.tools.remember import statement_session
from tests.reliability.support import locomo_document, memory_problems, visible_duplicates

_DEEP = int(os.environ.get("LOGICMAP_FUZZ_EXAMPLES", "0"))
TURN_CASES = _DEEP or 50
SOURCE_CASES = _DEEP or 24
REMEMBER_CASES = _DEEP or 10
POOL = ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
WORDS = ["puppy", "pottery", "marathon", "ramen", "museum", "bicycle", "bakery", "island", "violin", "garden"]
START = datetime(2023, 3, 4, 14, 15)
TALLY: Counter[str] = Counter()  # what the generated cases exercised (printed at the end, asserted to be broad)
RENAMED: set[tuple[str, str]] = set()


# -- generated conversations -----------------------------------------------------------------------
def _session(rng: random.Random, tag: str, number: int, dia_ids: list[str]) -> Session:
    stamp = START + timedelta(days=7 * number)
    turns = [
        RawTurn(
            dia_id=d,
            speaker=("Ana", "Rui")[i % 2],
            text=f"{tag} S{number} {d}: my {rng.choice(WORDS)} story number {rng.randrange(10**6)}",
        )
        for i, d in enumerate(dia_ids)
    ]
    return Session(
        session_id=f"S{number}", timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"), turns=turns
    )


def _file(
    rng: random.Random, tag: str, numbers: list[int], *, within: bool, conversation_id: str | None = None
) -> Conversation:
    """Sessions numbered ``numbers`` with dia ids from the pool: unique in the file unless ``within``."""
    free, sessions = list(POOL), []
    for number in numbers:
        k = rng.randint(1, 3)
        if within:
            ids = rng.sample(POOL, k)
        else:
            ids = rng.sample(free, min(k, len(free))) or [f"X{number}:1"]
            free = [d for d in free if d not in ids]
        sessions.append(_session(rng, tag, number, ids))
    return Conversation(conversation_id=conversation_id or tag, speakers=["Ana", "Rui"], sessions=sessions)


def _write_locomo(path: Path, conversations: list[Conversation]) -> Path:
    path.write_text(json.dumps([sample for conv in conversations for sample in locomo_document(conv)]))
    return path


def _cli(
    data_dir: Path, path: Path, namespace: str, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str]:
    code = main(
        [
            "--data-dir",
            str(data_dir),
            "--embeddings",
            "hashing",
            "ingest",
            str(path),
            "-n",
            namespace,
            "--policy",
            "heuristic",
            "--quiet",
            *flags,
        ]
    )
    return code, capsys.readouterr().err


# -- invariants ------------------------------------------------------------------------------------
def _check(res: Resources, namespace: str, expected: dict[str, dict[str, str]]) -> None:
    """Every committed session's every turn is stored with its text; cites and renames are sound."""
    snap = res.store.snapshot(namespace)
    assert memory_problems(snap) == []
    assert visible_duplicates(res.store, namespace) == []
    assert set(snap.manifest.sessions) == set(expected)
    stored: dict[str, dict[str, str]] = defaultdict(dict)
    for tid, turn in snap.turns.items():
        raw = turn.source_dia_id or tid
        assert raw not in stored[turn.session_id], f"session {turn.session_id} stores {raw} twice"
        stored[turn.session_id][raw] = turn.text
        if turn.source_dia_id is not None:
            holder = snap.turns.get(turn.source_dia_id)
            assert tid != turn.source_dia_id and holder is not None and holder.session_id != turn.session_id
            RENAMED.add((namespace, tid))
    assert dict(stored) == expected
    for event in snap.events.values():
        for tid in event.turn_ids:
            assert snap.turns[tid].session_id in event.sessions, f"event {event.id} cites {tid} of another session"


def _fingerprint(res: Resources, namespace: str) -> Any:
    return res.store.snapshot(namespace).fingerprint()


# -- turn identity ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(TURN_CASES))
def test_reused_dia_ids_never_replace_a_stored_turn(
    seed: int, module_resources: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"turn-identity-{seed}")
    res, namespace = module_resources, f"turns{seed}"
    data_dir = Path(res.settings.data_dir)
    expected: dict[str, dict[str, str]] = {}
    done: list[tuple[str, Conversation]] = []
    number = 1
    for index in range(rng.randint(2, 3)):
        if done and rng.random() < 0.15:
            path_kind, conv = rng.choice(done)  # the same file again: every session is already committed
            TALLY["resumed files"] += 1
        else:
            path_kind = rng.choice(["cli", "cli", "api", "api_within", "chat", "cli_duplicate"])
            numbers = list(range(number, number + rng.randint(1, 2) + (path_kind == "cli_duplicate")))
            number = numbers[-1] + 1
            # Later files continue the case's one conversation (its new sessions need --append: they repeat none).
            conv = _file(
                rng, f"case{seed}-f{index}", numbers, within=path_kind == "api_within", conversation_id=f"case{seed}"
            )
            if path_kind == "cli_duplicate":  # a later session of the file repeats an earlier one's dia id
                conv.sessions[-1].turns[0].dia_id = conv.sessions[0].turns[0].dia_id
        TALLY[f"files via {path_kind}"] += 1
        before = _fingerprint(res, namespace)
        # A file's sessions go into a namespace another source created under ids of their own (foreign_sessions).
        stored_as = (
            conv.sessions
            if path_kind == "chat"
            else foreign_sessions(res.store.manifest(namespace), conversation_source(conv), conv.sessions)
        )
        if path_kind.startswith("cli"):
            code, err = _cli(
                data_dir, _write_locomo(tmp_path / f"f{index}.json", [conv]), namespace, capsys, "--append"
            )
            if path_kind == "cli_duplicate":
                assert code == 2 and "duplicate dia id" in err and len(err.strip().splitlines()) == 1, err
                assert _fingerprint(res, namespace) == before  # nothing of the file was written
                continue
            assert code == 0, err
        elif path_kind == "chat":
            for session in conv.sessions:
                ingest_session(session, namespace, resources=res, policy="heuristic")
        else:
            ingest_conversation(conv, namespace, resources=res, policy="heuristic", append=True)
        for session in stored_as:
            expected[session.session_id] = {t.dia_id: t.text for t in session.turns}
        _check(res, namespace, expected)
        done.append((path_kind, conv))
    TALLY["turn-identity cases"] += 1


@pytest.mark.parametrize("seed", range(REMEMBER_CASES))
def test_remember_never_replaces_a_turn_holding_its_id(seed: int, module_resources: Resources) -> None:
    """The remember tool derives its dia id from a hash: when another session holds it, its turn gets another id."""
    res, namespace = module_resources, f"remember{seed}"
    rng = random.Random(f"remember-{seed}")
    when = START + timedelta(hours=rng.randrange(10_000))
    text = f"I keep {rng.choice(WORDS)} number {rng.randrange(10**6)} on the roof."
    taken = statement_session(namespace, text, "Alice", when).turns[0].dia_id
    squatter = Conversation(
        conversation_id="other",
        sessions=[
            Session(
                session_id="S1",
                turns=[
                    RawTurn(dia_id=taken, speaker="Bob", text="Bob was here first."),
                    RawTurn(dia_id="D1:2", speaker="Ana", text="So he was."),
                ],
            )
        ],
    )
    ingest_conversation(squatter, namespace, resources=res, policy="heuristic")
    tool = create_remember_tool(namespace, ingest=session_ingester(res, policy="heuristic"), clock=lambda: when)
    msg = tool.invoke({"type": "tool_call", "name": tool.name, "args": {"text": text, "speaker": "Alice"}, "id": "c1"})
    assert msg.status == "success", msg.content
    snap = res.store.snapshot(namespace)
    assert snap.turns[taken].text == "Bob was here first."
    stored_id = msg.artifact[0]["id"]
    assert stored_id != taken and snap.turns[stored_id].text == text and stored_id in msg.content
    session_id = msg.artifact[0]["session_id"]
    _check(res, namespace, {"S1": {taken: "Bob was here first.", "D1:2": "So he was."}, session_id: {taken: text}})
    TALLY["remember cases"] += 1


def test_a_rebase_after_a_racing_writer_renames_the_turns_it_took(module_resources: Resources) -> None:
    """Segmented on generation G, committed after another writer stored D1:1: the session's turns and the
    events and relations citing them move to a distinct id together."""
    res, namespace = module_resources, "race"
    runtime = _runtime(res)
    rng = random.Random("race")
    mine = _file(rng, "mine", [2], within=False)
    mine.sessions[0].turns = [
        RawTurn(dia_id=d, speaker="Ana", text=f"mine {d}: pottery class") for d in ("D1:1", "D1:2")
    ]
    state: dict[str, Any] = {"sessions": mine.sessions}
    for node in (prepare, segment, relate, fuse, topics):
        state.update(node(state, runtime))
    assert [t.dia_id for t in state["turns"]] == ["D1:1", "D1:2"]
    theirs = Conversation(
        conversation_id="theirs",
        sessions=[
            Session(session_id="S9", turns=[RawTurn(dia_id="D1:1", speaker="Rui", text="theirs D1:1: a marathon")])
        ],
    )
    ingest_conversation(theirs, namespace, resources=res, policy="heuristic")
    state.update(commit(state, runtime))
    assert route_after_commit(state) == "rebase"
    state.update(rebase(state, runtime))
    assert [t.dia_id for t in state["turns"]] == ["D1:1@S2", "D1:2"]
    assert all("D1:1" not in e.turn_ids for e in state["events"])
    for node in (fuse, topics, commit):
        state.update(node(state, runtime))
    _check(
        res,
        namespace,
        {
            "S9": {"D1:1": "theirs D1:1: a marathon"},
            "S2": {"D1:1": "mine D1:1: pottery class", "D1:2": "mine D1:2: pottery class"},
        },
    )


def _runtime(res: Resources, namespace: str = "race") -> Any:
    from langgraph.runtime import Runtime

    # append: the racing writer's session is another conversation's, joined on purpose.
    context = IngestContext(
        policy="heuristic", extract_facts=False, extract_cues=False, namespace=namespace, append=True, resources=res
    )
    return Runtime(context=context, store=None, stream_writer=lambda _: None, previous=None)


def test_the_store_refuses_a_turn_that_would_replace_another_sessions_turn(module_resources: Resources) -> None:
    """The last line of defence, for any writer: a commit naming a stored turn id of another session."""
    store, namespace = module_resources.store, "backstop"
    vector = module_resources.embeddings.embed_documents(["x"])

    def change(session: str, text: str, base: int, **extra: Any) -> ChangeSet:
        turn = Turn(namespace=namespace, session_id=session, dia_id="D1:1", speaker="A", text=text)
        return ChangeSet(namespace=namespace, base_generation=base, turns=[turn], turn_vectors=vector, **extra)

    store.commit(change("S1", "first", 0))
    with pytest.raises(TurnIdConflictError, match="'D1:1' of session 'S2'.*session 'S1'"):
        store.commit(change("S2", "second", 1))
    assert store.manifest(namespace).generation == 1 and store.snapshot(namespace).turns["D1:1"].text == "first"
    store.commit(change("S1", "first, corrected", 1))  # the session's own turn may be rewritten
    store.commit(change("S2", "second", 2, retire={"turns": ["D1:1"]}))  # an explicit retirement may replace it
    assert store.snapshot(namespace).turns["D1:1"].text == "second"


def test_a_session_naming_one_dia_id_twice_is_refused_before_any_write(module_resources: Resources) -> None:
    res, namespace = module_resources, "twice"
    ok = Session(session_id="S1", turns=[RawTurn(dia_id="D1:1", speaker="A", text="fine")])
    bad = Session(
        session_id="S2",
        turns=[RawTurn(dia_id="D2:1", speaker="A", text="one"), RawTurn(dia_id="D2:1", speaker="B", text="two")],
    )
    with pytest.raises(ValueError, match="'S2' holds the dia id 'D2:1' twice"):
        ingest_conversation(
            Conversation(conversation_id="c", sessions=[ok, bad]), namespace, resources=res, policy="heuristic"
        )
    assert res.store.manifest(namespace).generation == 0


# -- namespace sources -----------------------------------------------------------------------------
FOREIGN = ("chat", "other conversation", "python caller", "old, other sessions")
OWN = ("same conversation", "old, same sessions")


def _make_tenant(
    creator: str, conv: Conversation, namespace: str, res: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``namespace`` created by ``creator``; the "own" creators store the conversation's first session."""
    first = conv.model_copy(deep=True, update={"sessions": conv.sessions[:1]})
    if creator == "chat":
        chat = Session(session_id="chat-1", turns=[RawTurn(dia_id="C1:1", speaker="user", text="hello from chat")])
        ingest_session(chat, namespace, resources=res, policy="heuristic")
    elif creator in ("other conversation", "same conversation"):
        source = (
            first
            if creator == "same conversation"
            else first.model_copy(update={"conversation_id": f"{conv.conversation_id}-other"})
        )
        code, err = _cli(
            Path(res.settings.data_dir), _write_locomo(tmp_path / f"{namespace}.json", [source]), namespace, capsys
        )
        assert code == 0, err
    elif creator == "python caller":
        ingest_conversation(first, namespace, resources=res, policy="heuristic", source="api")
    else:  # written by a LogicMap that recorded no source
        session = (
            first.sessions[0]
            if creator == "old, same sessions"
            else first.sessions[0].model_copy(update={"session_id": "S77"})
        )
        turns = [
            Turn(
                namespace=namespace,
                session_id=session.session_id,
                dia_id=t.dia_id,
                speaker=t.speaker,
                text=t.text,
                position=i,
            )
            for i, t in enumerate(session.turns)
        ]
        info = SessionInfo(
            session_id=session.session_id, content_hash=session.content_hash(), generation=0, policy="heuristic"
        )
        res.store.commit(
            ChangeSet(
                namespace=namespace,
                base_generation=0,
                session=info,
                turns=turns,
                turn_vectors=res.embeddings.embed_documents([t.render() for t in turns]),
            )
        )
        assert res.store.manifest(namespace).source is None
    TALLY[f"tenants made by {creator}"] += 1


@pytest.mark.parametrize("seed", range(SOURCE_CASES))
def test_a_many_conversation_file_never_writes_into_another_sources_namespace(
    seed: int, module_resources: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"namespace-source-{seed}")
    res, base = module_resources, f"acme{seed}"
    data_dir = Path(res.settings.data_dir)
    ids = rng.sample(["bob", "alice", "carol", "dave", "eve"], rng.randint(2, 3))
    convs = [_file(rng, cid, [1, 2], within=False) for cid in ids]
    creators = {cid: rng.choice([None, *OWN]) for cid in ids}
    if seed % 2:  # half the files meet one or more namespaces of another source
        for cid in rng.sample(ids, rng.randint(1, len(ids))):
            creators[cid] = rng.choice(FOREIGN)
    targets = {cid: conversation_namespace(base, cid) for cid in ids}
    for conv in convs:
        if creators[conv.conversation_id]:
            _make_tenant(creators[conv.conversation_id], conv, targets[conv.conversation_id], res, tmp_path, capsys)
    refused = any(c in FOREIGN for c in creators.values())
    before = {ns: _fingerprint(res, ns) for ns in targets.values()}
    path = _write_locomo(tmp_path / "many.json", convs)

    loaded = load_conversations(path)
    if refused:
        with pytest.raises(NamespaceSourceError, match="nothing was written"):
            file_namespaces(loaded, base, res.store)
        foreign = next(targets[cid] for cid in ids if creators[cid] in FOREIGN)
        with pytest.raises(NamespaceSourceError):
            ingest_conversation(
                next(c for c in loaded if targets[c.conversation_id] == foreign),
                foreign,
                resources=res,
                policy="heuristic",
                exclusive=True,
            )
    code, err = _cli(data_dir, path, base, capsys)
    if refused:
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: namespace "), err
        assert any(targets[cid] in lines[0] for cid in ids if creators[cid] in FOREIGN), err
        assert {ns: _fingerprint(res, ns) for ns in targets.values()} == before  # not one namespace was touched
        TALLY["files refused"] += 1
        return
    assert code == 0, err
    for conv in convs:
        snap = res.store.snapshot(targets[conv.conversation_id])
        assert {"S1", "S2"} <= set(snap.manifest.sessions) and memory_problems(snap) == []
        assert snap.manifest.source == f"locomo:{conv.conversation_id}"  # recorded at creation, or adopted
    after = {ns: _fingerprint(res, ns) for ns in targets.values()}
    code, err = _cli(data_dir, path, base, capsys)  # resuming the same file is a no-op
    assert code == 0 and {ns: _fingerprint(res, ns) for ns in targets.values()} == after, err
    TALLY["files accepted"] += 1


def test_the_generated_cases_covered_every_path(request: pytest.FixtureRequest) -> None:
    """Runs last in the module: the counts the cases reached (printed for the issue note)."""
    if request.config.option.keyword or TALLY["turn-identity cases"] < TURN_CASES:
        pytest.skip("only meaningful after the whole module ran")
    TALLY["renamed turns"] = len(RENAMED)
    print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))
    assert TALLY["renamed turns"] >= TURN_CASES // 2
    assert TALLY["files via cli_duplicate"] > 0 and TALLY["resumed files"] > 0
    assert TALLY["files refused"] > 0 and TALLY["files accepted"] > 0
    assert all(TALLY[f"tenants made by {c}"] > 0 for c in (*FOREIGN, *OWN))
