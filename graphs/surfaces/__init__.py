"""The surfaces memory is reached through, besides the Python API: the command line, MCP, LangGraph's ``BaseStore`` and the API server's lifecycle graphs.

Its modules use ``memory``, ``prompts``, ``agents`` and ``tools``; which other rooms of ``graphs`` they may not import is ``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| module | owns |
| --- | --- |
| ``basestore`` | ``LogicMapStore``: the memory as a LangGraph ``BaseStore``, writing through ingest and forget, searching with the reranker |
| ``cli`` | the core commands of ``logicmap`` |
| ``lifecycle`` | forget, list and delete as graphs, for the API server |
| ``mcp_server`` | ``logicmap mcp``: the toolkit over the Model Context Protocol |
| ``visualize`` | ``logicmap graph``: the event graph drawn |
"""

__all__: list[str] = []
