"""Language with no LLM and no fitted vocabulary: the text toolkit, dates, and general word lists.

Like every room of ``memory``: deterministic, no LLM, nothing from ``agents``, ``graphs``, ``tools`` or ``evals``.

| module | owns |
| --- | --- |
| ``lexicon`` | the general word lists the no-LLM policies use (no fitted vocabulary) |
| ``text`` | the one text toolkit (tokens, stems, stop words, sentences) |
| ``timeparse`` | the one date module |
"""

__all__: list[str] = []
