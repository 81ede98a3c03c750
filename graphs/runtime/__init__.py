"""The plumbing every graph of a run shares: its resources, its entry keywords, its context, its pinned snapshot, its result and its tracing.

Its modules use ``memory``, ``prompts``, ``agents`` and ``tools``; which other rooms of ``graphs`` they may not import is ``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| module | owns |
| --- | --- |
| ``context`` | ``RunContext``: the policy, namespace and resources fields every graph's context declares |
| ``entry`` | every public entry point's keywords: an unknown one a ``TypeError`` naming the close valid ones |
| ``pin`` | a run's namespace, policy and snapshot generation, resolved once by its first node, and the pinned snapshot |
| ``resources`` | settings, store, embedder, chat model (``resources_of(runtime)``) |
| ``result`` | ``AnswerResult`` |
| ``tracing`` | LangSmith run names, tags, metadata; graphs that trace themselves |
"""

__all__: list[str] = []
