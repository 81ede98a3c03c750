"""LangGraph Studio entry point: ``studio/langgraph.json`` exposes every LogicMap graph to ``langgraph dev``.

Run ``make studio`` from the project root; per-run settings appear as each graph's context form. See README.
``server`` is the server's custom app (resources loaded at start, ``/logicmap/health``); ``tenant_guard`` is its
middleware that keeps a run from overriding its assistant's tenant or using another tenant's thread; ``store`` is
``generate_store``, ``LogicMapStore`` for ``langgraph.json``'s ``"store"`` key; ``store_guard`` is the tenant rule
the middleware applies to the server's ``/store`` routes (and ``authorize_store``, the same as an
``@auth.on.store()`` handler); ``requests`` is the one strict parser the guard reads requests with (a repeated
parameter or key is refused, and the server is handed what the guard read).
"""

__all__: list[str] = []
