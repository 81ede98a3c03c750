"""The answering strategies: one LangGraph StateGraph per method, their shared record and runner, and the registry that names them.

Its modules use ``memory``, ``prompts``, ``agents`` and ``tools``; which other rooms of ``graphs`` they may not import is ``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| module | owns |
| --- | --- |
| ``baselines`` | dense and BM25 top-k over turns (``DENSE``, ``BM25``) |
| ``compass`` | CompassMem: planner -> localize -> explorers (parallel ``Send``) -> merge (loop) -> refine -> respond |
| ``docs`` | ``docs/strategies.md`` generated from the registry |
| ``forward`` | Goal-Mem's forward baselines (reformulate, reflect, ReAct) |
| ``goalmem`` | Goal-Mem: goal -> decompose -> retrieve per subgoal -> unify -> refine antecedents -> answer |
| ``names`` | the registry's index: each strategy's name and ``module:attribute`` (``STRATEGY_PATHS``), importable without loading a graph |
| ``r2`` | Memory-R2's answer agent: retrieve -> distill -> answer |
| ``real`` | REAL: roots -> beam steps with one evaluator call -> stop / expand / counterfactual repair -> prune -> answer |
| ``reconstruct`` | MRAgent: a chat model bound to the memory tools reconstructs memory within turn and tool-call budgets |
| ``registry`` | the registry ``STRATEGIES`` (lazy: a strategy's module is imported on first use) and one ``answer()`` over every strategy |
| ``rerank`` | the graph-feature reranker: every turn scored on event-graph features -> respond from the best ``context_turns`` |
| ``strategy`` | the ``Strategy`` record, the shared ``QuestionInput``/``AnswerOutput``/``StrategyContext``/``StrategyState`` schemas and the one runner of a strategy graph |
"""

__all__: list[str] = []
