"""The chatbot: a chat graph that recalls through a strategy, answers (streamed) and remembers each turn.

Its modules use ``memory``, ``prompts``, ``agents`` and ``tools``; which other rooms of ``graphs`` they may not import is ``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| module | owns |
| --- | --- |
| ``chatbot`` | the chatbot's entry points (``build_chatbot_graph``, ``run_chat``, the compiled ``graph``) |
| ``graph`` | the chat graph: recall -> reply -> remember |
| ``ingestion`` | chat turns queued and ingested as sessions |
| ``messages`` | ``add_messages``: chat messages into memory |
| ``remote`` | the chatbot over a remote LangGraph API server |
| ``terminal`` | the terminal chat loop (``logicmap chat``) |
"""

__all__: list[str] = []
