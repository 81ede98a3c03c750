"""The LLM roles: one role per module, each a prompt, a typed output, validation, one retry and a fallback.

The rule of this layer: a role's module builds its messages with a prompt module from ``logicmap.prompts``,
asks the chat model for a typed pydantic output (``base.run_role``), validates it against what the role was
shown, retries once with the validation error, and otherwise returns its deterministic fallback and records a
``FallbackRecord``. Every call's cost goes into one ``Cost``. The no-LLM policy of a role lives beside it.
Roles use ``logicmap.memory`` and ``logicmap.prompts``; they never import ``logicmap.graphs`` or ``logicmap.tools``.

Where each method's roles are (graph in ``logicmap.graphs``, roles here):

| method | graph | roles (module: role) |
| --- | --- | --- |
| ingest (all methods) | ``graphs.ingest.ingest`` | ``segmenter``: segmenter; ``relations``: relation extractor; ``coref``: coreference judge; ``fact_extractor``: REAL fact extractor; ``cue_extractor``: MRAgent cue extractor; ``topic_abstractor``: MRAgent topic abstractor (Eq. 18, one call per session); ``session_analyst``: segmenter, fact and cue extractor in one call (combined extraction, the default); ``ingest_policy``: the run's policy object (these roles, or the no-LLM rules) |
| CompassMem | ``graphs.strategies.compass`` | ``planner``: planner and refiner; ``localizer``: start picker; ``explorer``: explorers; ``responder``: responder; ``compass_policy``: the run's policy (LLM roles or the no-LLM search rules) |
| Goal-Mem | ``graphs.strategies.goalmem`` | ``goalmem``: parser, decomposer, unifier, refiner, generator; ``goalmem_heuristics``: their no-LLM rules; ``goalmem_policy``: the run's policy (LLM roles or rules); ``goalmem_forward``: the forward baselines' roles; ``forward_policy``: the baselines' policy |
| REAL | ``graphs.strategies.real`` | ``real``: root planner, path evaluator, answerer, counterfactual repair rules; ``real_policy``: the run's policy (LLM roles or rules) |
| MRAgent | ``graphs.strategies.reconstruct``, ``graphs.chat.chatbot`` | the reconstruct agent is a chat model bound to ``logicmap.tools`` (the paper's seven); ``query_cues``: the question's cues (EXTRACTCUES); ``active_pruner``: prunes its active set after each tool round; ``chat_responder``: the chatbot's reply (plain text, streamed); ``reconstruct_policy``: its LLM and no-LLM policy (the deterministic navigator) |
| Memory-R2 | ``graphs.ingest.r2`` (ingest with ``memory_manager="r2"``), ``graphs.strategies.r2``, ``evals.train.logo_grpo`` | ``r2``: fact extractor and memory manager (ADD / UPDATE / DELETE / NOOP), fact answerer; ``r2_distill``: the answer agent's memory distillation; ``r2_policy``: the answer agent's LLM and no-LLM policy |
| evaluation | ``evals`` | ``judge``: LLM judge |

Plumbing: ``base`` (the role runner, the parts runner of combined calls, ``Cost``, ``FallbackRecord``), ``models`` (chat model factory:
``ChatOpenAI`` or any LangChain ``provider:model``), ``provider`` (typed provider errors, retries with backoff, the run's
deadline), ``windowing`` (sessions split into windows that fit the model's context),
``local_llm`` (the offline SmolLM2 server), ``testing`` (scripted chat models), ``answerers`` (every no-LLM answerer, named for what it
answers from), ``responder_policy`` (the LLM and no-LLM policy of strategies whose one role is the responder:
rerank, dense, bm25), ``item_ranking`` (how store items rank for a query, no LLM: dense relevance in [0, 1], the
newer statement of one attribute first; ``LogicMapStore.search`` and the rerank strategy on a store namespace).
"""

__all__: list[str] = []
