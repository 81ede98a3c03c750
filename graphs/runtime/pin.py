"""Resolve once, pin once: a run's namespace, policy and snapshot generation, resolved by its first node.

``pin_run`` is what the first node of every strategy graph returns into the state (``namespace``, ``policy``,
``generation``, and ``pending``: the last fast write it reads, ``memory.store.live``); every later node reads memory through ``pinned_snapshot``/``pinned_store`` at that generation, so
a commit landing mid-run (a chat turn stored, a session ingested) never changes what the rest of the run sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typing_extensions import TypedDict

from logicmap.graphs.runtime.resources import resolve_policy, resources_of, run_namespace
from logicmap.memory.store import NamespaceSnapshot, PinnedStore, StoragePort
from logicmap.memory.store.live import live_snapshot

__all__ = ["RunPin", "pin_run", "pinned_snapshot", "pinned_store", "snapshot_of"]


class RunPin(TypedDict):
    """What a run's first node resolves, once: whose memory, which policy, which committed generation."""

    namespace: str
    policy: str
    generation: int
    pending: int
    """The last pending write the run reads (``memory.store.live``; 0: none): writes after it are not its memory."""


def pin_run(runtime: Any, template: str | None, policy: str) -> RunPin:
    """The run's namespace (``template`` resolved against its config: ``run_namespace``), known to the store;
    its policy with ``auto`` resolved (``resolve_policy``, the one rule); the generation it reads."""
    res = resources_of(runtime)
    namespace = run_namespace(template)
    res.store.require_namespace(namespace)
    snapshot = res.store.snapshot(namespace)
    writes = res.store.pending_writes(namespace, after=snapshot.manifest.consolidated_through)
    return RunPin(
        namespace=namespace,
        policy=resolve_policy(policy, res),
        generation=snapshot.generation,
        pending=writes[-1].seq if writes else 0,
    )


def snapshot_of(store: StoragePort, pin: Mapping[str, Any]) -> NamespaceSnapshot:
    """``store``'s snapshot of the pinned namespace at the pinned generation (``pin`` is the state or a ``Send``
    task carrying the pin); the latest snapshot for a state that carries no generation (a node called alone on a
    hand-made state)."""
    generation = pin.get("generation")
    if generation is None:
        return store.snapshot(pin["namespace"])
    if pin.get("pending"):
        return live_snapshot(store, pin["namespace"], generation=generation, through=pin["pending"])
    return store.snapshot_at(pin["namespace"], generation)


def pinned_snapshot(pin: Mapping[str, Any], runtime: Any) -> NamespaceSnapshot:
    """The run's memory at its pinned generation (``snapshot_of`` on the run's store)."""
    return snapshot_of(resources_of(runtime).store, pin)


def pinned_store(pin: Mapping[str, Any], runtime: Any) -> Any:
    """A read view of the run's namespace at its pinned generation, for retrievers, backbones and memory tools;
    the store itself for a state that carries no generation."""
    store = resources_of(runtime).store
    generation = pin.get("generation")
    if generation is None:
        return store
    return PinnedStore(store, pin["namespace"], generation, through=pin.get("pending") or None)
