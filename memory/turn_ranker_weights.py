"""Weights of the no-LLM turn ranker (``memory.ranking``), written by ``python -m evals.train.turn_ranker``.

Fitted on 2026-11-22 (logistic regression, balanced classes, C=1) on: sample_conversation.json, long_conversation.json, holdout_conversation.json, holdout2_conversation.json, holdout3_conversation.json.
Leave-one-conversation-out evidence recall at 10 turns when they were written:
    sample_conversation.json: dense 1.000, ranker 1.000 (+0.000)
    long_conversation.json: dense 0.692, ranker 0.758 (+0.066)
    holdout_conversation.json: dense 0.667, ranker 0.786 (+0.120)
    holdout2_conversation.json: dense 0.583, ranker 0.785 (+0.202)
    holdout3_conversation.json: dense 0.697, ranker 0.866 (+0.169)
"""

COEFFICIENTS = {
    'own': 4.720746,
    'z_own': 0.497204,
    'own_question': -4.464639,
    'event': 0.198678,
    'z_event': 0.908939,
    'topic': 0.482859,
    'previous': 0.649357,
    'next': 0.338936,
    'reply': 1.688303,
    'bm25': 3.236689,
    'speaker_named': 1.196862,
    'dated_for_when': -0.236899,
    'length': 1.744476,
}
INTERCEPT = -8.880255
