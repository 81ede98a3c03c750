"""The forget a replacing commit carries: what a store put, a redo or a consolidation retires of the sessions it
writes again (``replacement_forget``), and the events a forget rebuilds from their kept turns (``rebuilt_events``).

Apart from ``graphs.writes.forget`` so the ingest graph reaches it without importing the forgetting entry points (which
consolidate pending writes first, through the ingest graph: ``graphs.writes.consolidate``).
"""

from __future__ import annotations

from logicmap.agents.segmenter import turns_summary
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.records.forgetting import ForgetPlan, forget_change, plan_forget, rebuilt_event, turns_to_forget
from logicmap.memory.records.records import Event, Turn
from logicmap.memory.store import ChangeSet, NamespaceSnapshot

__all__ = ["rebuilt_events", "replacement_forget"]


def rebuilt_events(snap: NamespaceSnapshot, plan: ForgetPlan, turns: dict[str, Turn]) -> tuple[list[Event], list[str]]:
    """The events a forget rebuilds from their kept turns (the no-LLM summary), and a note for each that was built
    with a model (rebuilt without one: a fallback)."""
    events, notes = [], []
    for eid, kept in plan.rebuild_events.items():
        old = snap.events[eid]
        session = snap.manifest.sessions.get(old.session_id)
        heuristic = old.source == "heuristic" or (session is not None and session.policy == "heuristic")
        if not heuristic:
            notes.append(f"event {eid}: rebuilt from its kept turns without a model (fallback)")
        events.append(
            rebuilt_event(old, [turns[t] for t in kept], turns_summary, "heuristic" if heuristic else "fallback")
        )
    return events, notes


def replacement_forget(
    res: Resources, snap: NamespaceSnapshot, session_ids: list[str], *, surface: str = "store", purge: bool = False
) -> ChangeSet | None:
    """The forget of the sessions a commit replaces, on the snapshot it commits on (``None``: none held here).
    The ingest merges it into its own commit (``memory.records.forgetting.with_replacement``): one generation retires the
    old records and writes the new ones."""
    known = {t.session_id for t in snap.turns.values()}
    chosen = (
        turns_to_forget(snap, session_ids=[s for s in session_ids if s in known]) if set(session_ids) & known else set()
    )
    if not chosen:
        return None
    plan = plan_forget(snap, chosen)
    events, notes = rebuilt_events(snap, plan, dict(snap.turns))
    vectors = res.embeddings.embed_documents([e.summary for e in events]) if events else []
    return forget_change(
        snap, plan, rebuilt=events, rebuilt_vectors=vectors, surface=surface, extra_notes=notes, purged=purge
    )
