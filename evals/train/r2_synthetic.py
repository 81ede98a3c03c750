"""A synthetic memory-update task with a known optimal manager policy, for the LoGo-GRPO learning proof.

Two people state single-valued attributes (city, job, car) over short sessions, repeat them, change
them and retract them, with small talk in between. Each turn carries the edit the optimal manager
makes: a new value is ADD, a repeat is NOOP, a changed value is UPDATE, a retraction is DELETE and
small talk is SKIP (the optimal extractor drops it; the manager keeps it out with NOOP). Every attribute that
holds a value at the end is asked about; ``changed`` names the questions whose answer changed (an earlier value
differs from the current one), where a memory that kept the stale value next to the new one is wrong.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from logicmap.memory.files.loaders import Conversation, QAItem, RawTurn, Session

__all__ = ["OPTIMAL_OPS", "LabelledConversation", "make_update_task"]

OPTIMAL_OPS = ("ADD", "NOOP", "UPDATE", "DELETE", "SKIP")

# Disjoint name and value pools: held-out conversations use the second half, training the first.
_NAMES = (
    ("Maya", "Tom", "Lena", "Omar", "Rosa", "Ivan", "Nadia", "Pablo"),
    ("Greta", "Hugo", "Ines", "Bram", "Sara", "Kofi", "Yuki", "Dario"),
)
_VALUES = {
    "city": (
        ("Porto", "Lisbon", "Madrid", "Dublin", "Oslo", "Vienna"),
        ("Prague", "Athens", "Zurich", "Krakow", "Bergen", "Turin"),
    ),
    "job": (
        ("nurse", "baker", "pilot", "teacher", "plumber", "chemist"),
        ("lawyer", "florist", "dentist", "welder", "curator", "surveyor"),
    ),
    "car": (
        ("Volvo", "Fiat", "Toyota", "Skoda", "Mazda", "Honda"),
        ("Renault", "Subaru", "Peugeot", "Kia", "Seat", "Lancia"),
    ),
}
# First-person templates; the extractor's no-LLM path rewrites them in the third person.
_STATE = {"city": "I live in {v}.", "job": "I work as a {v}.", "car": "I drive a {v}."}
_REPEAT = {
    "city": "I still live in {v}, as before.",
    "job": "I still work as a {v}, as before.",
    "car": "I still drive a {v}, as before.",
}
_CHANGE = {"city": "I live in {v} now.", "job": "I work as a {v} now.", "car": "I drive a {v} now."}
_RETRACT = {"city": "I no longer live in {v}.", "job": "I no longer work as a {v}.", "car": "I no longer drive a {v}."}
_QUESTION = {"city": "Where does {n} live?", "job": "What does {n} work as?", "car": "What car does {n} drive?"}
_SMALL_TALK = ("Hi! Good to see you again.", "Haha, that is funny.", "Thanks, talk soon!", "Oh wow, nice.")


@dataclass
class LabelledConversation:
    """A conversation, the optimal op of every turn (by dia id) and the ids of the questions whose answer changed."""

    conversation: Conversation
    optimal: dict[str, str]
    changed: frozenset[str] = field(default_factory=frozenset)


def _next_event(
    state: dict[tuple[str, str], str | None], people: list[str], rng: random.Random
) -> tuple[str, str, str]:
    """(person, attribute, kind) of the next informative turn: unset -> ADD; set -> repeat, change or retraction."""
    person, attribute = rng.choice(people), rng.choice(sorted(_STATE))
    if state.get((person, attribute)) is None:
        return person, attribute, "ADD"
    return person, attribute, rng.choices(["NOOP", "UPDATE", "DELETE"], weights=[1, 1, 0.6])[0]


def _one(index: int, sessions: int, pool: int, rng: random.Random) -> LabelledConversation:
    people = rng.sample(list(_NAMES[pool]), 2)
    state: dict[tuple[str, str], str | None] = {}
    evidence: dict[tuple[str, str], str] = {}
    history: dict[tuple[str, str], list[str]] = {}  # every value each attribute held, in order
    optimal: dict[str, str] = {}
    built = []
    for s in range(1, sessions + 1):
        turns: list[RawTurn] = []
        for _ in range(rng.choice([1, 2]) if s > 1 else 2):
            person, attribute, kind = _next_event(state, people, rng)
            current = state.get((person, attribute))
            if kind in ("ADD", "UPDATE"):
                value = rng.choice([v for v in _VALUES[attribute][pool] if v != current])
                text = (_STATE if kind == "ADD" else _CHANGE)[attribute].format(v=value)
                state[(person, attribute)] = value
                history.setdefault((person, attribute), []).append(value)
            elif kind == "NOOP":
                text = _REPEAT[attribute].format(v=current)
            else:
                text = _RETRACT[attribute].format(v=current)
                state[(person, attribute)] = None
            dia = f"D{s}:{len(turns) + 1}"
            turns.append(RawTurn(dia_id=dia, speaker=person, text=text))
            optimal[dia] = kind
            if kind in ("ADD", "UPDATE"):
                evidence[(person, attribute)] = dia
        if rng.random() < 0.5:
            dia = f"D{s}:{len(turns) + 1}"
            turns.append(RawTurn(dia_id=dia, speaker=rng.choice(people), text=rng.choice(_SMALL_TALK)))
            optimal[dia] = "SKIP"
        built.append(Session(session_id=f"S{s}", timestamp_text=f"day {s}", turns=turns))
    qa = [
        QAItem(
            question_id=f"q{n}",
            question=_QUESTION[attribute].format(n=person),
            answer=value,
            evidence=[evidence[(person, attribute)]],
            category=4,
        )
        for n, ((person, attribute), value) in enumerate(sorted(state.items()))
        if value is not None
    ]
    conversation = Conversation(
        conversation_id=f"synthetic-{'heldout' if pool else 'train'}-{index}", speakers=people, sessions=built, qa=qa
    )
    held = {f"q{n}": key for n, (key, value) in enumerate(sorted(state.items())) if value is not None}
    changed = frozenset(q for q, key in held.items() if set(history[key]) != {state[key]})
    return LabelledConversation(conversation, optimal, changed)


def make_update_task(n: int, sessions: int, *, seed: int = 0, held_out: bool = False) -> list[LabelledConversation]:
    """``n`` conversations of ``sessions`` sessions each. Held-out conversations use other names and values."""
    if n < 0 or sessions < 1:
        raise ValueError("need n >= 0 conversations of at least one session")
    rng = random.Random(f"r2-synthetic/{seed}/{int(held_out)}/{sessions}")
    return [_one(i, sessions, int(held_out), rng) for i in range(n)]
