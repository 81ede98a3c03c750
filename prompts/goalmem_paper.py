"""Goal-Mem's own prompts (Appendix I of the paper), used by ``GoalMemContext.faithful``.

The rules and few-shot examples are the paper's words; the paper's line formats (Goal / Rule / Variables /
Subgoals, Unification Status / Substitution / ..., Refinement Status / Missing Info / ...) become the typed JSON
replies each role already has (``Decomposition``, ``Unification``, ``Refinement``, ``GoalAnswer``), so the
examples are shown in that JSON. What the typed replies have no field for (the decomposer's Premises copy, the
refiner's Missing Info, Relation Type and Retrieval Queries, the unifier's Final Answer, which is the responder's
here) is left out; the unifier's "I dont know" on a conflict becomes an unresolved subgoal, and the responder's
"I dont know" answer follows the unifier's ANSWER RULES.
"""

from __future__ import annotations

import json

__all__ = [
    "ANSWER_RULES",
    "DECOMPOSE_EXAMPLES",
    "DECOMPOSE_RULES",
    "NEXT_HOP_RULES",
    "REFINE_EXAMPLES",
    "REFINE_RULES",
    "UNIFY_EXAMPLES",
    "UNIFY_RULES",
    "VERSION",
]

VERSION = "goalmem-paper-v1"

# I.1.1 Initial decomposition (system_commonsense), its requirements and steps.
DECOMPOSE_RULES = """You will be provided only with a question about a person.
Generate one concise commonsense goal decomposition that can guide later evidence retrieval and answer verification.
Requirements:
- Do NOT use any specific retrieved facts or invented details.
- Use general human commonsense only.
- Keep premises/subgoals abstract and checkable from future conversation evidence.
- The decomposition should help identify what evidence would be sufficient to answer the question.
- Phrase each premise as the kind of EVENT, ACTION, ATTRIBUTE, or ATTITUDE a participant would naturally mention in a casual personal conversation.
- DO NOT phrase premises as META-CLAIMS about the conversation itself. FORBIDDEN openings include: "the conversation explicitly states ...", "the conversation gives ...", "the message names ...", "a fact says ...", "the speaker explicitly mentions ...".
- Prefer concrete event/attribute language ("the person visits Stamford", "the person talks about a wedding in December") over evidentiary framing ("the conversation contains a statement about a wedding in December").
- Preserve exact entity anchors from the question and make answer variables explicit as (x:type), (y:type), etc.
Goal decomposition:
Step 1 - Identify the central entities in the question: subject, object/topic/instrument/place/activity, named person, time qualifier, and requested answer type.
Step 2 - Identify any variables that must be substituted to answer the question. Write variables as (x:type), (y:type), etc.
Step 3 - Generate atomic subgoals. Each subgoal must be factual, verifiable, and phrased as the kind of event, action, attribute, or attitude that could naturally appear in a personal conversation memory.
Step 4 - Preserve exact entity anchors from the question. Closely related but distinct entities are not substitutes (e.g. guitar vs violin; Korean class vs Korea trip; current role vs previous role).
Step 5 - Use facts only as optional grounding context. Do NOT answer the question and do NOT invent concrete substitutions."""

# I.1.2 Next-hop decomposition (a breadth step after a failed one): what its system prompt adds.
NEXT_HOP_RULES = """You will be provided with a question about a person and previously generated inference rules.
Generate one NEW commonsense goal decomposition that is complementary, not redundant, with prior rules.
- Avoid repeating any prior rule verbatim or semantically."""

_CAREER = "What career field is Caroline likely to pursue in her education?"
_FITNESS = "Would Melanie be likely to attend an outdoor fitness event?"


def _example(question: str, reply: dict[str, object], **extra: str) -> str:
    lines = [f"Question: {question}", *(f"{k}: {v}" for k, v in extra.items()), f"Reply: {json.dumps(reply)}"]
    return "\n".join(lines)


# I.1.1 / I.1.2 few-shot examples, in the typed reply (the Rule becomes the rationale).
DECOMPOSE_EXAMPLES = "\n\n".join(
    [
        _example(
            _CAREER,
            {
                "subgoals": [
                    "Caroline is actively exploring (x:career_field)",
                    "Caroline has expressed direct interest in (x:career_field)",
                    "Caroline finds work in (x:career_field) meaningful",
                ],
                "rationale": "IF Caroline is actively exploring (x:career_field) AND Caroline has expressed "
                "direct interest in (x:career_field) AND Caroline finds work in (x:career_field) "
                "meaningful, THEN Caroline is likely to pursue (x:career_field) in her education.",
            },
        ),
        _example(
            _FITNESS,
            {
                "subgoals": [
                    "Melanie regularly engages in outdoor physical activity",
                    "Melanie is training for a competitive running event",
                ],
                "rationale": "IF Melanie regularly engages in outdoor physical activity AND Melanie is training "
                "for a competitive running event, THEN Melanie would likely be interested in "
                "attending an outdoor fitness event.",
            },
        ),
        _example(
            _CAREER,
            {
                "subgoals": ["Caroline repeatedly describes (x:career_field) as meaningful or personally rewarding"],
                "rationale": "The new decomposition uses repeated valuation rather than training steps.",
            },
            **{
                "Existing rules/decompositions that should NOT be repeated": "IF Caroline consistently expresses sustained interest in (x:career_field) AND Caroline takes concrete "
                "steps toward training or education in (x:career_field), THEN Caroline is likely to pursue "
                "(x:career_field) in her education."
            },
        ),
    ]
)

# I.2 Unification: the task, the entity-anchor check and the unification process, word for word.
UNIFY_RULES = """You are answering questions about people based on facts extracted from their personal conversations.
This prompt implements the VERIFIABLE UNIFICATION stage of Goal-Mem.
Task:
- Given the question, optional goal, optional subgoals, general rules, current substitutions/known info, and retrieved facts, decide whether the retrieved facts ground the goal.
- Compute any candidate variable substitutions theta = {x / e, ...} that are supported by retrieved facts.
- If grounding fails, report unresolved subgoals and known grounded information.
ENTITY-ANCHOR CHECK (do this BEFORE selecting facts):
1. Identify the question's central entities: its subject, the specific object/topic/instrument/place/activity it asks about, and any qualifier ("previous", "first", named person, time window, etc.).
2. Use ONLY facts that mention those exact entities or facts that can be unified through an explicit variable in a subgoal. Closely related but distinct entities (guitar vs violin; Korean class on Wednesday vs trip to Korea; current role vs previous role; one party's brownies vs another party's cake) are NOT substitutes.
3. If no fact mentions the question's central entity and no subgoal variable can validly bridge to it, the goal is not grounded. Do not pick a thematically similar fact as a fallback.
UNIFICATION PROCESS:
1. Apply any Current Substitution / Known Info to the active subgoals before evaluating new facts.
2. For each subgoal psi_i and candidate fact m_j, propose substitutions only for explicit variables such as (x:drink) or (z:cafe).
3. Type consistency: accept x/e only if e is an instance of the variable type or has a type that entails it in context. For example, Kyoto Latte may fill (x:drink); guitar may not fill (x:instrument asked as violin) unless the subgoal variable is typed broadly as instrument and the question does not require violin.
4. Equality with existing substitutions: if x is already bound in the current substitution, any new binding for x must be the same entity in context. Reject conflicting bindings.
5. Logical entailment: after applying the candidate substitution, the retrieved fact must entail the grounded subgoal. Topical similarity is not enough.
6. Simultaneous consistency: perform the check across all active subgoals and facts as a set. Do not let the order of facts decide which conflicting substitution wins.
7. Conflict handling: if facts ground the same required variable with incompatible values and the conflict cannot be resolved from the facts alone, answer "I dont know": leave the subgoals that need the variable unresolved and say "conflict" in their reason.
- Do NOT make assumptions beyond the provided facts, rules, and current substitutions."""

# I.2 few-shot (the dog without a name), in the typed reply.
UNIFY_EXAMPLES = _example(
    "What is the name of Melanie's dog?",
    {
        "results": [
            {"subgoal": "G1", "resolved": True, "bindings": [], "facts": ["1"], "reason": "Fact 1"},
            {
                "subgoal": "G2",
                "resolved": False,
                "bindings": [],
                "facts": [],
                "reason": "no fact states the dog's name",
            },
        ]
    },
    Subgoals="G1: Melanie has a dog; G2: Melanie's dog has name (x:person_or_pet_name)",
    Facts="1: (Melanie, has_pet, dog); 2: (Melanie, enjoys, walking her dog in the park)",
)

# I.3 Refinement: the objective and the principles, word for word.
REFINE_RULES = """You are refining unresolved subgoals for Goal-Mem's depth loop.
This prompt implements SUBGOAL REFINEMENT VIA BACKWARD CHAINING.
Objective:
- Do NOT answer the user question.
- Do NOT redo unification.
- For each unresolved subgoal, generate a more basic requisite antecedent subgoal whose grounding would help satisfy the unresolved subgoal.
Refinement principles:
1. Target the exact unresolved subgoal. Preserve all central entities and qualifiers from the question and from the unresolved subgoal.
2. Do not merely paraphrase the unresolved subgoal. Generate an antecedent that would make the unresolved part checkable.
Example: unresolved "(x:drink) served in (z:cafe visited last week)" can refine to "Alice visited (z:cafe) last week" if z is unknown.
3. Keep unresolved variables explicit as (x:type), (y:type), etc. Reuse the same variable names when the refined subgoal is intended to ground the same variable.
4. Respect existing substitutions. If x is already bound, use the bound entity unless the unification trace says the binding is conflicted.
5. Do not invent constants. Only use constants that appear in the question, Known Info, Current Substitution, or retrieved facts.
6. Avoid repeated refinement. If Previously Retrieved Missing Info or Previously Refined Subgoals are provided, the new refinement MUST take a different angle.
7. If no useful new refinement is possible, set Refinement Status to stop and explain why: here, give an empty list."""

REFINE_EXAMPLES = "\n\n".join(
    [
        _example(
            "Alice: I like the cafe I went to last week, what drink should I try this time?",
            {"antecedents": [{"subgoal": "G3", "antecedent": "Alice visited (z:cafe) last week"}]},
            **{
                "Unresolved subgoals": "G3: (x:drink) is served in (z:cafe visited last week) (missing: z is not "
                "grounded; no fact identifies the cafe Alice visited last week)"
            },
        ),
        _example(
            "What is the name of Melanie's dog?",
            {
                "antecedents": [
                    {"subgoal": "G2", "antecedent": "Melanie mentions her dog by name as (x:person_or_pet_name)"}
                ]
            },
            **{
                "Unresolved subgoals": "G2: Melanie's dog has name (x:person_or_pet_name) (missing: no fact states "
                "the dog's name)"
            },
        ),
    ]
)

# I.2's ANSWER RULES (the unifier's Final Answer, which the responder gives here).
ANSWER_RULES = """ANSWER RULES:
- Your answer must be based on the provided facts and general rules/subgoals.
- If the question requires a specific value (date, name, number, location, object, etc.) and the value is not grounded by a successful substitution or an explicit fact, answer "I dont know".
- Partial or hedged answers ("around that time", "probably", "likely", "it seems") are FORBIDDEN unless the question itself asks for likelihood/preference and the likelihood judgment is grounded by the rule.
- If the current facts and rules are not sufficient to answer the question, Final Answer must be "I dont know".
- Do NOT make assumptions beyond the provided facts, rules, and current substitutions.
- Final Answer: the shortest possible phrase directly supported by the facts/substitution, or "I dont know"."""
