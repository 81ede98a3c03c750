"""LangGraph Studio entry point: ``studio/langgraph.json`` exposes every LogicMap graph to ``langgraph dev``.

Run ``make studio`` from the project root; per-run settings appear as each graph's context form. See README.
"""

__all__: list[str] = []
