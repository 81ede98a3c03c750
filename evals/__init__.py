"""Benchmark harness: metrics (evals.metrics), strategy specs (evals.specs), the judge model (evals.judge), result
records (evals.records), the run loop (evals.runner), reports (evals.report), the eval commands (evals.cli), bench scripts
(evals.bench), training (evals.train: the turn and traversal rankers, Memory-R2's LoGo-GRPO), the leave-one-conversation-out
recall of the reranker on public conversations that writes its weights (evals.loco) and the other learners tried
for it (evals.loco_learners), the mutation check of
docs/fidelity.md (evals.mutate), evals.fake_openai (an OpenAI-compatible stand-in server on 127.0.0.1 for
provider-fault tests and benchmarks), evals.common (what the bench and training scripts share: the machine line,
memory used, fresh resources, markdown tables), and evals.fingerprint (the memory's and every no-LLM answer's
fingerprint, to show a restructuring changed no behaviour).

Submodules are imported on demand, so ``from evals.metrics import token_f1`` loads no model or graph.
"""

__all__: list[str] = []
