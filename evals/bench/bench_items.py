"""Store items ranked like facts: ``LogicMapStore.search`` beside LangGraph's ``InMemoryStore`` on generated memories.

Personal facts of 12 generated users (seeded RNG, templates: city, job, employer, pet, car, partner, hobby, diet,
favourite food, sport, instrument, language), written as LangMem's manage tool writes memories: each fact is
created under its own key; then some facts are corrected, half by a NEW key (a second memory, newer, states the
same attribute: "I moved to Porto."), half by an UPDATE of the same key; then some items are deleted. Every user
also holds distractors that share the attribute's words about someone else ("My sister lives in Lyon.", "I
visited Oslo last year."). Each attribute is asked by a paraphrased question; the gold item is the attribute's
current memory (the correction's when corrected; a deleted attribute is not asked).

The same operations, in the same order, go to ``LogicMapStore`` (``policy="heuristic"``, one batch per user and
phase) and to ``InMemoryStore(index={"embed": <the same embedder>, "dims": ...})``. Reported per half of the
users: top-1 accuracy over every question; over the correction questions, the share whose corrected item ranks
first, and the share whose corrected item ranks above the stale one (the correction wins; an update by key leaves no
stale item). Users u00-u05 are the DEVELOPMENT half (where the item scoring was chosen, over seeds 41-43); u06-u11
the HELD-OUT half (reported, never tuned on).

Usage: ``python -m logicmap.evals.bench.bench_items [--embeddings hashing,minilm] [--seed 41]``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, print_table

__all__ = ["Question", "UserPlan", "main", "plan_user", "run"]

USERS = 12
DEV = tuple(f"u{i:02d}" for i in range(6))  # development half: the scoring was chosen here
HELD_OUT = tuple(f"u{i:02d}" for i in range(6, 12))  # reported, never tuned on

# attribute: (values, statements of the value, corrections to a new value, questions, distractors sharing words)
ATTRIBUTES: dict[str, dict[str, list[str]]] = {
    "city": {
        "values": ["Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Dublin", "Vienna", "Prague", "Lyon", "Krakow"],
        "state": ["I live in {v}.", "I'm based in {v}.", "Home for me is {v}."],
        "correct": ["I moved to {v} last month.", "I relocated to {v}.", "I now live in {v}."],
        "ask": ["Which city does the user live in?", "Where is the user's home?", "Where does the user live now?"],
        "distract": ["My sister lives in {w}.", "I visited {w} last year.", "My best friend moved to {w}."],
    },
    "job": {
        "values": [
            "nurse",
            "teacher",
            "software engineer",
            "architect",
            "accountant",
            "chef",
            "pharmacist",
            "electrician",
            "journalist",
            "dentist",
        ],
        "state": ["I work as a {v}.", "I'm a {v} by profession.", "My job: {v}."],
        "correct": ["I changed careers and now work as a {v}.", "I'm a {v} now.", "New job: I work as a {v}."],
        "ask": ["What does the user do for a living?", "What is the user's profession?", "What's the user's job?"],
        "distract": ["My brother works as a {w}.", "I met a {w} at the party.", "My mother was a {w} for years."],
    },
    "employer": {
        "values": [
            "Siemens",
            "Google",
            "Unilever",
            "Deloitte",
            "Airbus",
            "Spotify",
            "Zara",
            "Philips",
            "Bosch",
            "Novartis",
        ],
        "state": ["I work at {v}.", "My employer is {v}.", "I'm employed by {v}."],
        "correct": ["I left my old company and joined {v}.", "I now work at {v}.", "I switched employers to {v}."],
        "ask": ["Which company employs the user?", "Who does the user work for?", "Where is the user employed?"],
        "distract": ["My cousin applied to {w}.", "I read a news story about {w}.", "My neighbour works for {w}."],
    },
    "pet": {
        "values": ["Rex", "Luna", "Milo", "Bella", "Oscar", "Coco", "Max", "Nala", "Simba", "Pip"],
        "state": ["My dog is called {v}.", "I have a dog named {v}.", "{v} is my dog."],
        "correct": ["I adopted a new dog called {v}.", "My dog now is {v}.", "Our dog {v} joined the family."],
        "ask": ["What is the name of the user's dog?", "What's the user's dog called?", "Who is the user's pet?"],
        "distract": [
            "My friend's dog is called {w}.",
            "I walked my neighbour's dog {w}.",
            "A dog named {w} lives next door.",
        ],
    },
    "car": {
        "values": [
            "Toyota Corolla",
            "Honda Civic",
            "Tesla Model 3",
            "VW Golf",
            "Ford Focus",
            "Renault Clio",
            "Fiat Panda",
            "BMW 3 Series",
            "Kia Niro",
            "Skoda Octavia",
        ],
        "state": ["I drive a {v}.", "My car is a {v}.", "I own a {v}."],
        "correct": ["I sold my old car and bought a {v}.", "My car now is a {v}.", "I got a new car, a {v}."],
        "ask": ["What car does the user drive?", "Which car does the user own?", "What is the user's car?"],
        "distract": ["My dad drives a {w}.", "I rented a {w} on holiday.", "My colleague's car is a {w}."],
    },
    "partner": {
        "values": ["Ana", "Tom", "Sofia", "Lukas", "Emma", "Noah", "Ines", "Pedro", "Clara", "Jonas"],
        "state": ["My partner is {v}.", "I'm in a relationship with {v}.", "I live with my partner {v}."],
        "correct": ["I'm now dating {v}.", "My new partner is {v}.", "{v} and I are together now."],
        "ask": ["Who is the user's partner?", "Who is the user dating?", "What is the name of the user's partner?"],
        "distract": ["My brother's partner is {w}.", "I had lunch with {w} from work.", "My friend {w} got engaged."],
    },
    "hobby": {
        "values": [
            "rock climbing",
            "pottery",
            "chess",
            "surfing",
            "gardening",
            "photography",
            "knitting",
            "salsa dancing",
            "birdwatching",
            "woodworking",
        ],
        "state": ["My hobby is {v}.", "In my free time I do {v}.", "I spend weekends on {v}."],
        "correct": ["These days my hobby is {v}.", "I took up {v} instead.", "My new hobby is {v}."],
        "ask": [
            "What is the user's hobby?",
            "What does the user do in their free time?",
            "How does the user spend weekends?",
        ],
        "distract": ["My sister's hobby is {w}.", "I watched a documentary about {w}.", "My kid tried {w} once."],
    },
    "diet": {
        "values": [
            "vegetarian",
            "vegan",
            "pescatarian",
            "gluten-free",
            "keto",
            "lactose-free",
            "paleo",
            "low-carb",
            "halal",
            "kosher",
        ],
        "state": ["I eat a {v} diet.", "I'm {v}.", "My diet is {v}."],
        "correct": ["I switched to a {v} diet.", "I'm {v} now.", "My diet changed: now {v}."],
        "ask": ["What diet does the user follow?", "What does the user eat?", "Does the user have a diet?"],
        "distract": ["My roommate is {w}.", "The restaurant had a {w} menu.", "My uncle tried a {w} diet."],
    },
    "food": {
        "values": ["sushi", "lasagna", "tacos", "ramen", "paella", "curry", "pizza", "falafel", "pho", "risotto"],
        "state": ["My favourite food is {v}.", "I love eating {v}.", "Nothing beats {v} for me."],
        "correct": ["My favourite food is now {v}.", "These days I prefer {v}.", "{v} became my favourite dish."],
        "ask": [
            "What is the user's favourite food?",
            "Which dish does the user like most?",
            "What does the user love to eat?",
        ],
        "distract": ["My mother cooks {w} on Sundays.", "We ordered {w} for the office.", "My friend hates {w}."],
    },
    "sport": {
        "values": [
            "tennis",
            "football",
            "swimming",
            "running",
            "cycling",
            "basketball",
            "yoga",
            "boxing",
            "volleyball",
            "rowing",
        ],
        "state": ["I play {v} every week.", "My sport is {v}.", "I train {v} twice a week."],
        "correct": ["I quit my old sport and now do {v}.", "My sport is now {v}.", "I switched to {v}."],
        "ask": [
            "Which sport does the user practise?",
            "What sport does the user do?",
            "What does the user train each week?",
        ],
        "distract": ["My son plays {w}.", "I watched {w} on TV.", "My coworker does {w}."],
    },
    "instrument": {
        "values": ["violin", "piano", "guitar", "cello", "drums", "flute", "saxophone", "ukulele", "trumpet", "harp"],
        "state": ["I play the {v}.", "I'm learning the {v}.", "My instrument is the {v}."],
        "correct": [
            "I gave up my old instrument and play the {v} now.",
            "I now play the {v}.",
            "My instrument is now the {v}.",
        ],
        "ask": [
            "What instrument does the user play?",
            "Which instrument is the user learning?",
            "What does the user play musically?",
        ],
        "distract": ["My daughter plays the {w}.", "I heard a {w} concert.", "My friend sold his {w}."],
    },
    "language": {
        "values": [
            "Spanish",
            "Japanese",
            "German",
            "Italian",
            "Mandarin",
            "Arabic",
            "Korean",
            "French",
            "Dutch",
            "Greek",
        ],
        "state": ["I'm learning {v}.", "I study {v} in the evenings.", "I take {v} lessons."],
        "correct": [
            "I stopped my old course and now learn {v}.",
            "I'm learning {v} now.",
            "I switched to {v} lessons.",
        ],
        "ask": [
            "Which language is the user learning?",
            "What language does the user study?",
            "What language lessons does the user take?",
        ],
        "distract": ["My teacher speaks {w}.", "I saw a {w} film.", "My partner's parents speak {w}."],
    },
}
CORRECTED = 5  # attributes corrected per user (alternately by a new key and by an update of the same key)
DELETED = 1  # attributes deleted per user (the question about it is not asked)
DISTRACTORS = 14  # distractor items per user


@dataclass
class Question:
    """A paraphrased question about one attribute, its gold key, and whether the attribute was corrected."""

    text: str
    gold: str
    corrected: bool
    stale: str | None = None  # the older item a correction by a new key leaves (an update replaced it)


@dataclass
class UserPlan:
    """One user's operations, phase by phase, and the questions asked after them."""

    user: str
    phases: list[list[tuple[str, dict[str, Any] | None]]] = field(default_factory=list)  # (key, value or delete)
    questions: list[Question] = field(default_factory=list)

    @property
    def items(self) -> int:
        return sum(1 for phase in self.phases for _, v in phase if v is not None)


def plan_user(user: str, rng: random.Random) -> UserPlan:
    """The user's facts, corrections, deletions, distractors and questions, drawn from ``rng``."""
    plan = UserPlan(user)
    names = list(ATTRIBUTES)
    chosen = {a: rng.sample(ATTRIBUTES[a]["values"], 3) for a in names}  # value, corrected value, distractor value
    created: list[tuple[str, dict[str, Any] | None]] = []
    for a in names:
        created.append(
            (f"{a}-{rng.randrange(10**6):06d}", {"content": rng.choice(ATTRIBUTES[a]["state"]).format(v=chosen[a][0])})
        )
    shapes = {a: rng.sample(ATTRIBUTES[a]["distract"], 3) for a in names}  # no two distractors alike
    for i in range(DISTRACTORS):
        a = names[i % len(names)]
        text = shapes[a][i // len(names)].format(w=chosen[a][2])
        created.append((f"note-{rng.randrange(10**6):06d}", {"content": text}))
    rng.shuffle(created)
    plan.phases.append(created)
    key_of = {k.split("-")[0]: k for k, _ in created if not k.startswith("note-")}
    picked = rng.sample(names, CORRECTED + DELETED)
    corrected, deleted = picked[:CORRECTED], picked[CORRECTED:]
    corrections: list[tuple[str, dict[str, Any] | None]] = []
    gold, stale = dict(key_of), {}
    for i, a in enumerate(corrected):
        value = {"content": rng.choice(ATTRIBUTES[a]["correct"]).format(v=chosen[a][1])}
        key = key_of[a] if i % 2 else f"{a}-new-{rng.randrange(10**6):06d}"  # update by key / a new memory
        corrections.append((key, value))
        gold[a] = key
        if key != key_of[a]:
            stale[a] = key_of[a]
    plan.phases.append(corrections)
    plan.phases.append([(key_of[a], None) for a in deleted])
    for a in names:
        if a not in deleted:
            plan.questions.append(Question(rng.choice(ATTRIBUTES[a]["ask"]), gold[a], a in corrected, stale.get(a)))
    return plan


def _write(store: Any, namespace: tuple[str, ...], phase: list[tuple[str, dict[str, Any] | None]]) -> None:
    from langgraph.store.base import PutOp

    store.batch([PutOp(namespace, key, value) for key, value in phase])


def _score(store: Any, plans: list[UserPlan]) -> dict[str, tuple[int, ...]]:
    """Per half: (top-1 hits, questions, corrected first, correction questions, correction above its stale item)."""
    out: dict[str, list[int]] = {"dev": [0, 0, 0, 0, 0], "held-out": [0, 0, 0, 0, 0]}
    for plan in plans:
        half = out["dev" if plan.user in DEV else "held-out"]
        for q in plan.questions:
            ranked = [hit.key for hit in store.search(("memories", plan.user), query=q.text, limit=100)]
            first = bool(ranked) and ranked[0] == q.gold
            half[0] += first
            half[1] += 1
            if q.corrected:
                half[2] += first
                half[3] += 1
                half[4] += q.stale is None or ranked.index(q.gold) < ranked.index(q.stale)
    return {k: tuple(v) for k, v in out.items()}


def run(embedder: str, seed: int) -> dict[str, dict[str, tuple[int, ...]]]:
    """Both stores, the same operations, the same embedder: each store's counts per half."""
    from langgraph.store.memory import InMemoryStore

    from logicmap.graphs.surfaces.basestore import LogicMapStore

    rng = random.Random(seed)
    plans = [plan_user(f"u{i:02d}", rng) for i in range(USERS)]
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh_resources(Path(tmp), embeddings=embedder)
        dims = len(res.embeddings.embed_query("dimension probe"))
        stores = {
            "LogicMapStore": LogicMapStore(resources=res, policy="heuristic"),
            "InMemoryStore": InMemoryStore(index={"embed": res.embeddings, "dims": dims}),
        }
        try:
            for phase in range(3):
                for plan in plans:
                    for store in stores.values():
                        _write(store, ("memories", plan.user), plan.phases[phase])
                time.sleep(0.01)  # a later phase is strictly newer
            return {name: _score(store, plans) for name, store in stores.items()}
        finally:
            res.store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings", default="hashing,minilm", help="comma-separated: hashing, minilm")
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    plans = [plan_user(f"u{i:02d}", rng) for i in range(USERS)]
    print(
        f"{USERS} users ({len(DEV)} development: {DEV[0]}-{DEV[-1]}, {len(HELD_OUT)} held out: "
        f"{HELD_OUT[0]}-{HELD_OUT[-1]}), {sum(p.items for p in plans)} items written "
        f"({sum(len(p.phases[0]) for p in plans)} created, {sum(len(p.phases[1]) for p in plans)} corrections, "
        f"{sum(len(p.phases[2]) for p in plans)} deletes), {sum(len(p.questions) for p in plans)} questions "
        f"({sum(q.corrected for p in plans for q in p.questions)} about a corrected attribute); seed {args.seed}"
    )
    rows = []
    for embedder in [e.strip() for e in args.embeddings.split(",") if e.strip()]:
        started = time.perf_counter()
        counts = run(embedder, args.seed)
        for half in ("dev", "held-out"):
            for name, by_half in counts.items():
                hit, n, fixed, nc, above = by_half[half]
                rows.append(
                    [
                        embedder,
                        half,
                        name,
                        f"{hit}/{n} ({hit / n:.3f})",
                        f"{fixed}/{nc} ({fixed / nc:.3f})",
                        f"{above}/{nc} ({above / nc:.3f})",
                    ]
                )
        print(f"{embedder}: {time.perf_counter() - started:.0f} s")
    print_table(
        ["embedder", "users", "store", "top-1", "corrected value first", "correction above the stale item"], rows
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
