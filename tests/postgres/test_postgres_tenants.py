"""Tenant isolation on PostgreSQL: the randomized multi-namespace workload of
``tests/reliability/test_tenant_isolation.py`` (ingests interleaved with every strategy, every tool and store
queries; namespaces that differ only by case or suffix; colliding record ids) run on one database, and the same
assertions: nothing returned for one namespace carries another's marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from logicmap.graphs.runtime.resources import Resources
from logicmap.settings import LogicMapSettings
from tests.postgres_support import EmbeddedPostgres
from tests.reliability.test_tenant_isolation import (  # noqa: F401 - collected here, on this module's workload
    SEED,
    SESSIONS,
    TENANTS,
    Workload,
    available_strategy,
    strategy_names,
    test_a_tool_agent_driven_by_a_model_stays_in_its_namespace,
    test_every_namespace_holds_exactly_its_own_memory,
    test_every_strategy_was_exercised_on_the_tenants,
    test_every_tool_was_exercised_on_the_tenants,
    test_no_tenant_reads_another_tenants_records,
    test_remember_writes_only_its_own_namespace,
    test_the_leak_detector_sees_foreign_records,
    test_two_tenants_chatting_at_once_stay_apart,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def workload(postgres_server: EmbeddedPostgres) -> Iterator[Workload]:
    """The reliability suite's workload, in the same order of operations, on a database of its own."""
    url = postgres_server.create_database()
    res = Resources(settings=LogicMapSettings(store_url=url, embedding_provider="hashing"))
    res.llm_ = None
    work = Workload(res, SEED)
    answers = {}
    for name in strategy_names():
        try:
            answers[name] = available_strategy(name)
        except pytest.skip.Exception:
            continue
    work.ingest_next()
    operations = ["ingest"] * (len(TENANTS) * SESSIONS - 1) + ["ask"] * 3 * len(answers) + ["store"] * 12
    operations += ["tool"] * 30
    work.rng.shuffle(operations)
    for op in operations:
        if op == "ingest":
            work.ingest_next()
        elif op == "ask":
            name = work.rng.choice(sorted(answers))
            work.ask(name, answers[name])
        elif op == "tool":
            work.call_tool()
        else:
            work.query_store()
    while any(n < SESSIONS for n in work.ingested.values()):
        work.ingest_next()
    for name in sorted(answers):
        for _ in range(2):
            work.ask(name, answers[name])
    yield work
    res.store.close()
    postgres_server.drop_database(url)
