"""The LangGraph StateGraphs: one graph per method, wiring the roles of ``logicmap.agents`` over memory.

The rule of this layer: a graph module reads top to bottom like LangGraph's templates: state and context
types, nodes as module-level functions ``(state, runtime)``, routers returning ``Literal[...]``, then
``build_*_graph()`` that only wires nodes and edges, then ``graph = builder.compile()`` (no checkpointer: Studio
and the API server supply persistence). A node finds its store, embedder and chat model with
``resources.resources_of(runtime)`` (the run's context, else the process-wide defaults), so it can be imported
and tested alone. Graphs use ``memory``, ``agents`` and ``tools``; nothing here imports ``logicmap.evals``.

| method | graph module | control flow |
| --- | --- | --- |
| ingest | ``ingest`` (+ ``ingest_nodes``, ``ingest_facts``, ``ingest_cues``, ``enrich``, ``ingest_redo``) | prepare -> segment -> relate -> fuse -> topics -> facts and cues (parallel) -> commit, per session |
| CompassMem | ``compass`` | planner -> localize -> explorers (parallel ``Send``) -> merge (loop) -> refine -> respond |
| graph-feature reranker | ``rerank`` | rank (every turn scored on event-graph features) -> respond from the best ``context_turns`` |
| Goal-Mem | ``goalmem``; baselines in ``forward`` | goal -> decompose (breadth) -> retrieve per subgoal -> unify -> refine antecedents (depth) -> answer |
| REAL | ``real`` | roots -> beam steps with one evaluator call -> stop / expand / counterfactual repair -> prune -> answer |
| MRAgent | ``reconstruct``, ``chatbot`` (re-exports ``chat_graph``, ``chat_ingestion``, ``chat_messages``, ``chat_remote``, ``chat_terminal``) | a chat model bound to the memory tools; a chatbot that recalls, answers (streamed) and remembers each turn; ``add_messages`` (chat messages into memory) |
| Memory-R2 | ``ingest_r2`` (ingest with ``memory_manager="r2"``), ``r2`` | extract -> manage (ADD / UPDATE / DELETE / NOOP) per session; retrieve -> distill -> answer |
| baselines | ``baselines`` | dense and BM25 top-k over turns |

Shared: ``resources`` (settings, store, embedder, chat model), ``entry`` (every public entry point's keywords: an
unknown one a ``TypeError`` naming the close valid ones, ``config=`` a LangChain ``RunnableConfig``), ``result``
(``AnswerResult``), ``strategy`` (the
``Strategy`` record, the shared ``QuestionInput``/``AnswerOutput``/``StrategyContext``/``StrategyState`` schemas and
the one runner of a strategy graph), ``pin`` (a run's namespace, policy and snapshot generation, resolved once by its first
node, and the pinned snapshot every later node reads), ``strategies`` (the registry ``STRATEGIES`` and one ``answer()`` over every
strategy), ``strategy_names`` (the registry's names, for the CLI's parser), ``tracing`` (LangSmith run names, tags,
metadata), ``strategy_docs`` (``docs/strategies.md`` generated from the registry), ``visualize`` (``logicmap graph``),
``cli`` (the core commands), ``forget`` (forget, update, list and get memories, delete a namespace: ``logicmap.forget``
and its async twins), ``replacement`` (the forget a replacing commit carries), ``consolidate`` (the write path: fast
writes to the pending log and the consolidator that builds them into memory), ``lifecycle`` (forget, list and delete as graphs, for the API server), ``mcp_server``
(``logicmap mcp``: the toolkit over the Model Context Protocol), ``basestore`` (``LogicMapStore``: the memory as a
LangGraph ``BaseStore``, writing through the ingest graph and ``forget``, searching with the reranker).
"""

__all__: list[str] = []
