"""Prompt templates, one module per LLM role: the typed response model beside the message builder.

Each module has a ``VERSION`` that changes whenever its wording or schema changes (a paper's own prompt, used by a
method's ``faithful`` configuration, has its ``PAPER_VERSION``). ``common`` holds the shared
wording; the others, by method:

- ingest: ``segment``, ``relate``, ``coref``, ``cues``, ``analyze`` (the session analyst's combined call);
- CompassMem: ``plan``, ``localize``, ``explore``, ``respond``;
- Goal-Mem: ``goalmem_parse``, ``goalmem_decompose``, ``goalmem_unify``, ``goalmem_refine``, ``goalmem_generate``,
  ``goalmem_paper`` (the paper's Appendix I texts, for ``faithful``);
  its forward baselines: ``forward_answer``, ``forward_react``, ``forward_reflect``, ``forward_reformulate``;
- REAL: ``real_extract``, ``real_roots``, ``real_evaluate``, ``real_answer``;
- MRAgent: ``reconstruct``, ``reconstruct_prune``, ``query_cues``, ``abstract_topics`` (topic abstraction at ingest); the chatbot's reply: ``chat``;
- Memory-R2: ``r2_extract``, ``r2_manage``, ``r2_distill``, ``r2_answer`` (the paper's answer prompt, for ``faithful``);
- evaluation: ``judge``.
"""

from logicmap.prompts.common import schema_instructions

__all__ = ["schema_instructions"]
