"""Store items ranked like facts: ``LogicMapStore.search`` beside LangGraph's ``InMemoryStore`` on generated memories.

Personal facts of 12 generated users (seeded RNG, templates: city, job, employer, pet, car, partner, hobby, diet,
favourite food, sport, instrument, language), written as LangMem's manage tool writes memories, in four phases:

1. each fact created under its own key, with 8 of the user's 20 distractors: items that share the attributes'
   words, about someone else ("My sister lives in Lyon.", "A dog named Luna lives next door.") or one-off events
   of the user's ("I visited Oslo last year.");
2. the first corrections of 6 attributes (in turn: a NEW key, "I moved to Porto."; an UPDATE of the key; a DELETE
   of the key and a new key), shuffled with 6 more distractors;
3. second corrections of 3 of them (a new key or an update of the current key), shuffled with the last 6
   distractors;
4. the deletes of one more attribute (every key of it).

A correction is phrased by any template of its attribute other than the one of the statement it replaces: a
marked change ("I moved to Porto last month."), a plain restatement ("I'm based in Porto.") or an indirect one
("Just signed a lease in Porto."). Each attribute is asked by a paraphrased question; the gold item is the
attribute's current memory (a deleted attribute is not asked).

The same operations, in the same order, go to ``LogicMapStore`` (``policy="heuristic"``, one batch per user and
phase) and to ``InMemoryStore(index={"embed": <the same embedder>, "dims": ...})``. Reported per half of the
users: top-1 accuracy over every question; over the correction questions, the share whose current item ranks
first, and the share whose current item ranks above every older item of the attribute still stored (the
correction wins; an update by key or a delete leaves none). Users u00-u05 are the DEVELOPMENT half (where the item
scoring is chosen, over seeds 41-43; ``--users dev`` runs only them); u06-u11 the HELD-OUT half (reported, never
tuned on).

Usage: ``python -m logicmap.evals.bench.bench_items [--embeddings hashing,minilm] [--seed 41] [--users both]``.
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
        "rephrase": [
            "{v} is where I'm settled these days.",
            "We packed up everything; the new flat is in {v}.",
            "Just signed a lease in {v}.",
        ],
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
        "rephrase": [
            "These days I earn my living as a {v}.",
            "Started a new position as a {v}.",
            "Retrained, and I've been a {v} since spring.",
        ],
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
        "rephrase": [
            "{v} hired me in the spring.",
            "First week at {v} went well.",
            "Signed my contract with {v} yesterday.",
        ],
        "ask": ["Which company employs the user?", "Who does the user work for?", "Where is the user employed?"],
        "distract": ["My cousin applied to {w}.", "I read a news story about {w}.", "My neighbour works for {w}."],
    },
    "pet": {
        "values": ["Rex", "Luna", "Milo", "Bella", "Oscar", "Coco", "Max", "Nala", "Simba", "Pip"],
        "state": ["My dog is called {v}.", "I have a dog named {v}.", "{v} is my dog."],
        "correct": ["I adopted a new dog called {v}.", "My dog now is {v}.", "Our dog {v} joined the family."],
        "rephrase": [
            "We brought home a puppy, {v}.",
            "{v} the puppy sleeps on my bed now.",
            "Meet {v}, the newest member of our household.",
        ],
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
        "rephrase": [
            "Just picked up a {v} from the dealer.",
            "Traded in the old one for a {v}.",
            "The {v} in my driveway is brand new.",
        ],
        "ask": ["What car does the user drive?", "Which car does the user own?", "What is the user's car?"],
        "distract": ["My dad drives a {w}.", "I rented a {w} on holiday.", "My colleague's car is a {w}."],
    },
    "partner": {
        "values": ["Ana", "Tom", "Sofia", "Lukas", "Emma", "Noah", "Ines", "Pedro", "Clara", "Jonas"],
        "state": ["My partner is {v}.", "I'm in a relationship with {v}.", "I live with my partner {v}."],
        "correct": ["I'm now dating {v}.", "My new partner is {v}.", "{v} and I are together now."],
        "rephrase": [
            "{v} and I have been seeing each other for a few months.",
            "I'm with {v} these days.",
            "Third date with {v} went great; it's official.",
        ],
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
        "rephrase": [
            "{v} takes up all my spare time lately.",
            "Spent Saturday on {v} again, I'm hooked.",
            "Signed up for a {v} club.",
        ],
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
        "rephrase": [
            "Cut everything else out; {v} from now on.",
            "My doctor put me on a {v} plan.",
            "Eating strictly {v} these days.",
        ],
        "ask": ["What diet does the user follow?", "What does the user eat?", "Does the user have a diet?"],
        "distract": ["My roommate is {w}.", "The restaurant had a {w} menu.", "My uncle tried a {w} diet."],
    },
    "food": {
        "values": ["sushi", "lasagna", "tacos", "ramen", "paella", "curry", "pizza", "falafel", "pho", "risotto"],
        "state": ["My favourite food is {v}.", "I love eating {v}.", "Nothing beats {v} for me."],
        "correct": ["My favourite food is now {v}.", "These days I prefer {v}.", "{v} became my favourite dish."],
        "rephrase": [
            "Lately I can't get enough of {v}.",
            "{v} is what I crave most now.",
            "Ordered {v} three times this week, my new favourite.",
        ],
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
        "rephrase": [
            "Joined a {v} club this season.",
            "{v} training keeps me fit now.",
            "Signed up for {v} at the gym.",
        ],
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
        "rephrase": [
            "Bought a {v} and practise daily.",
            "Lessons on the {v} started this month.",
            "{v} practice every evening now.",
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
        "rephrase": [
            "Enrolled in a {v} course.",
            "Flashcards in {v} every morning now.",
            "My tutor and I do {v} conversation weekly.",
        ],
        "ask": [
            "Which language is the user learning?",
            "What language does the user study?",
            "What language lessons does the user take?",
        ],
        "distract": ["My teacher speaks {w}.", "I saw a {w} film.", "My partner's parents speak {w}."],
    },
}
CORRECTED = 6  # attributes corrected per user (each first correction: a new key, an update of the key, or a delete
# of the old key and a new one, in turn)
TWICE = 3  # of them, corrected a second time, later (a new key or an update of the current key, in turn)
DELETED = 1  # attributes deleted per user, every key of it (the question about it is not asked)
DISTRACTORS = 20  # distractor items per user, written across the phases, interleaved with the corrections
# Distractors per phase: with the facts, with the first corrections, with the second ones.
SPREAD = (8, 6, 6)
Op = tuple[str, dict[str, Any] | None]  # (key, value), or (key, None): a delete


@dataclass
class Question:
    """A paraphrased question about one attribute, its gold key, and whether the attribute was corrected."""

    text: str
    gold: str
    corrected: bool
    stale: list[str] = field(default_factory=list)  # the older items of the attribute still stored (new keys)
    times: int = 0  # how many times the attribute was corrected


@dataclass
class UserPlan:
    """One user's operations, phase by phase, and the questions asked after them."""

    user: str
    phases: list[list[Op]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def items(self) -> int:
        return sum(1 for phase in self.phases for _, v in phase if v is not None)

    @property
    def corrections(self) -> int:
        return sum(1 for phase in self.phases[1:3] for k, v in phase if v is not None and not k.startswith("note-"))

    @property
    def deletes(self) -> int:
        return sum(1 for phase in self.phases for _, v in phase if v is None)


def _say(template: str, value: str) -> str:
    text = template.format(v=value, w=value)
    return text[:1].upper() + text[1:]


def _new_key(rng: random.Random, attribute: str) -> str:
    return f"{attribute}-{rng.randrange(10**6):06d}"


def plan_user(user: str, rng: random.Random) -> UserPlan:
    """The user's facts, corrections, deletions, distractors and questions, drawn from ``rng``: the facts and a
    first share of the distractors; then the first corrections with more distractors, shuffled together; then the
    second corrections with the rest; then the deletes. A correction is phrased by any template of its attribute
    other than the one of the statement it replaces: a marked change ("I moved to Porto."), a plain restatement
    ("I'm based in Porto.") or an indirect one ("Just signed a lease in Porto.")."""
    plan = UserPlan(user)
    names = list(ATTRIBUTES)
    chosen = {a: rng.sample(ATTRIBUTES[a]["values"], 4) for a in names}  # value, 1st and 2nd correction, distractor
    said: dict[str, str] = {}  # the template of each attribute's current statement
    keys: dict[str, list[str]] = {}  # each attribute's stored keys, oldest first (the last is current)
    created: list[Op] = []
    for a in names:
        said[a] = rng.choice(ATTRIBUTES[a]["state"])
        keys[a] = [_new_key(rng, a)]
        created.append((keys[a][0], {"content": _say(said[a], chosen[a][0])}))
    shapes = {a: rng.sample(ATTRIBUTES[a]["distract"], 3) for a in names}  # no two distractors alike
    notes: list[Op] = []
    for i in range(DISTRACTORS):
        a = names[i % len(names)]
        notes.append(
            (f"note-{rng.randrange(10**6):06d}", {"content": _say(shapes[a][i // len(names) % 3], chosen[a][3])})
        )
    rng.shuffle(notes)
    picked = rng.sample(names, CORRECTED + DELETED)
    corrected, deleted = picked[:CORRECTED], picked[CORRECTED:]
    twice = corrected[:TWICE]
    times = dict.fromkeys(names, 0)
    batches: list[list[Op]] = [created, [], []]

    def correct(a: str, value: str, mode: int) -> list[Op]:
        templates = [t for kind in ("correct", "state", "rephrase") for t in ATTRIBUTES[a][kind] if t != said[a]]
        said[a] = rng.choice(templates)
        text = {"content": _say(said[a], value)}
        times[a] += 1
        if mode == 1:  # LangMem's update: the same key, the new value
            return [(keys[a][-1], text)]
        key = _new_key(rng, a)
        ops: list[Op] = [(keys[a][-1], None)] if mode == 2 else []  # delete the outdated memory, create a new one
        if mode == 2:
            keys[a].pop()
        keys[a].append(key)
        return [*ops, (key, text)]

    for i, a in enumerate(corrected):
        batches[1] += correct(a, chosen[a][1], i % 3)
    for i, a in enumerate(twice):
        batches[2] += correct(a, chosen[a][2], i % 2)
    start = 0
    for batch, count in zip(batches, SPREAD, strict=True):
        ops = batch + notes[start : start + count]
        start += count
        rng.shuffle(ops)  # a delete stays before the create that replaces it: deletes first
        batch[:] = sorted(ops, key=lambda op: op[1] is not None)
    plan.phases = [*batches, [(k, None) for a in deleted for k in keys[a]]]
    for a in names:
        if a not in deleted:
            question = Question(rng.choice(ATTRIBUTES[a]["ask"]), keys[a][-1], times[a] > 0, keys[a][:-1], times[a])
            plan.questions.append(question)
    return plan


def _write(store: Any, namespace: tuple[str, ...], phase: list[Op]) -> None:
    from langgraph.store.base import PutOp

    if phase:
        store.batch([PutOp(namespace, key, value) for key, value in phase])


def _score(store: Any, plans: list[UserPlan]) -> dict[str, tuple[int, ...]]:
    """Per half: (top-1 hits, questions, corrected first, correction questions, correction above its stale items)."""
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
                half[4] += all(ranked.index(q.gold) < ranked.index(s) for s in q.stale)
    return {k: tuple(v) for k, v in out.items()}


def run(embedder: str, seed: int, users: str = "both") -> dict[str, dict[str, tuple[int, ...]]]:
    """Both stores, the same operations, the same embedder: each store's counts per half. ``users``: ``dev``,
    ``held-out`` or ``both`` (the plans are drawn for every user either way, so a half's are the same)."""
    from langgraph.store.memory import InMemoryStore

    from logicmap.graphs.surfaces.basestore import LogicMapStore

    rng = random.Random(seed)
    plans = [plan_user(f"u{i:02d}", rng) for i in range(USERS)]
    wanted = {"dev": DEV, "held-out": HELD_OUT, "both": DEV + HELD_OUT}[users]
    plans = [p for p in plans if p.user in wanted]
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh_resources(Path(tmp), embeddings=embedder)
        dims = len(res.embeddings.embed_query("dimension probe"))
        logicmap = LogicMapStore(resources=res, policy="heuristic")
        stores = {
            "LogicMapStore": logicmap,
            "InMemoryStore": InMemoryStore(index={"embed": res.embeddings, "dims": dims}),
        }
        try:
            for phase in range(len(plans[0].phases)):
                for plan in plans:
                    for store in stores.values():
                        _write(store, ("memories", plan.user), plan.phases[phase])
                time.sleep(0.01)  # a later phase is strictly newer
            return {name: _score(store, plans) for name, store in stores.items()}
        finally:
            logicmap.close()  # its consolidator stops before the memory store closes under it
            res.store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings", default="hashing,minilm", help="comma-separated: hashing, minilm")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--users", choices=("dev", "held-out", "both"), default="both", help="which half to run")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    plans = [plan_user(f"u{i:02d}", rng) for i in range(USERS)]
    questions = [q for p in plans for q in p.questions]
    print(
        f"{USERS} users ({len(DEV)} development: {DEV[0]}-{DEV[-1]}, {len(HELD_OUT)} held out: "
        f"{HELD_OUT[0]}-{HELD_OUT[-1]}), {sum(p.items for p in plans)} items written "
        f"({sum(len(p.phases[0]) for p in plans)} created with the first distractors, "
        f"{sum(p.corrections for p in plans)} corrections, {sum(p.deletes for p in plans)} deletes), "
        f"{len(questions)} questions ({sum(q.corrected for q in questions)} about a corrected attribute, "
        f"{sum(q.times > 1 for q in questions)} of them corrected twice); seed {args.seed}"
    )
    rows = []
    halves = ("dev", "held-out") if args.users == "both" else (args.users,)
    for embedder in [e.strip() for e in args.embeddings.split(",") if e.strip()]:
        started = time.perf_counter()
        counts = run(embedder, args.seed, args.users)
        for half in halves:
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
        ["embedder", "users", "store", "top-1", "corrected value first", "correction above the stale items"], rows
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
