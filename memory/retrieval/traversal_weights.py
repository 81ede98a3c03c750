"""Weights of the second hop of the no-LLM search (``memory.retrieval.traversal``), written by
``python -m logicmap.evals.train.traversal_ranker``.

Fitted on 2026-11-22 (logistic regression, balanced classes, C=1) on: sample_conversation.json, long_conversation.json, holdout_conversation.json, holdout2_conversation.json, holdout3_conversation.json, the seeds taken from the shipped first-hop ranker.
Leave-one-conversation-out evidence recall at 10 turns (ranker alone -> ranker + traversal) when they were written:
    sample_conversation.json: 1.000 -> 1.000 (+0.000)
    long_conversation.json: 0.758 -> 0.762 (+0.003)
    holdout_conversation.json: 0.786 -> 0.795 (+0.009)
    holdout2_conversation.json: 0.785 -> 0.754 (-0.031)
    holdout3_conversation.json: 0.866 -> 0.864 (-0.002)
"""

COEFFICIENTS = {
    "own": 4.413667,
    "z_own": 0.427334,
    "own_question": -3.603780,
    "event": 0.251103,
    "z_event": 0.593235,
    "topic": -1.294600,
    "previous": 0.320039,
    "next": 0.639563,
    "reply": 2.366608,
    "bm25": 3.004754,
    "speaker_named": 1.174052,
    "dated_for_when": -0.144804,
    "length": 1.556199,
    "same_event": 1.050274,
    "related_event": 0.657780,
    "shared_entity": 0.061419,
    "same_topic": 0.483203,
    "seed_similarity": 0.715813,
    "other_session": -0.508164,
    "seed": 1.715484,
    "bridge_event": 0.040228,
    "bridge_turn": 0.158146,
    "bridge_neighbour": 0.014989,
}
INTERCEPT = -8.321262
