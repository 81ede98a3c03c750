"""The LangGraph StateGraphs: one graph per method, wiring the roles of ``logicmap.agents`` over memory.

The rule of this layer: a graph module reads top to bottom like LangGraph's templates: state and context
types, nodes as module-level functions ``(state, runtime)``, routers returning ``Literal[...]``, then
``build_*_graph()`` that only wires nodes and edges, then ``graph = builder.compile()`` (no checkpointer: Studio
and the API server supply persistence). A node finds its store, embedder and chat model with
``resources.resources_of(runtime)`` (the run's context, else the process-wide defaults), so it can be imported
and tested alone. Graphs use ``memory``, ``agents`` and ``tools``; nothing here imports ``logicmap.evals``.

The modules live in rooms (sub-packages), each with its own module table; which room may import which is
``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| room | holds |
| --- | --- |
| ``strategies`` | the answering strategies (``compass``, ``rerank``, ``goalmem``, ``forward``, ``real``, ``reconstruct``, ``r2``, ``baselines``), the ``Strategy`` record and runner (``strategy``), the lazy ``registry`` and its index ``names``, ``docs`` |
| ``ingest`` | the ingest graph (``ingest``), its ``nodes``, the enrichers (``enrich``, ``facts``, ``cues``, ``r2``) and the ``redo`` graph |
| ``writes`` | the write path after ingest (``consolidate``), forgetting (``forget``, ``replacement``) |
| ``chat`` | the chatbot (``chatbot``, ``graph``, ``ingestion``, ``messages``, ``remote``, ``terminal``) |
| ``surfaces`` | ``cli``, ``mcp_server``, ``basestore`` (``LogicMapStore``), ``lifecycle`` (the API server's forget/list/delete graphs), ``visualize`` |
| ``runtime`` | what every run shares: ``resources``, ``context``, ``entry``, ``pin``, ``result``, ``tracing`` |
"""

__all__: list[str] = []
