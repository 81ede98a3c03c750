"""Weights of the graph-feature reranker (``memory.ranking``), written by ``python -m logicmap.evals.loco``.

Fitted on 2026-11-25 (logistic regression, balanced classes, C=1) on the public LoCoMo
conversations conv-26, conv-30, conv-41, conv-42, conv-43 (../shared/data/locomo-dev5.json; not in this repository).
Leave-one-conversation-out evidence recall at 10 turns of this configuration when they were written:
    R@10 0.795; multi-hop 0.514, temporal 0.878, open-domain 0.532, single-hop 0.888
"""

COEFFICIENTS = {
    'own': -0.334950,
    'z_own': 0.687651,
    'own_question': -1.372190,
    'event': 0.268350,
    'z_event': 0.365406,
    'topic': 2.088074,
    'previous': -1.117557,
    'next': 0.306798,
    'reply': 3.009800,
    'bm25': 0.960031,
    'speaker_named': 2.282503,
    'dated_for_when': -0.406308,
    'length': 0.992308,
    'session_own': 1.344604,
    'session_bm25': 1.268711,
    'event_bm25': 1.093346,
    'window_bm25': 1.237383,
    'fact_key': 1.312859,
    'prf': 1.208284,
    'time_match': 0.356705,
}
INTERCEPT = -9.468385
SESSION_DIVERSITY = 0.0
