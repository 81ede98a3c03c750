"""Weights of the graph-feature reranker (``memory.retrieval.ranking``), written by ``python -m logicmap.evals.loco``.

Fitted on 2026-11-27 (logistic regression, balanced classes, C=1, with the question's context:
CONTEXT weighs each feature's best value over the question's turns; evals.loco.design) on the public LoCoMo
conversations conv-26, conv-30, conv-41, conv-42, conv-43 (../shared/data/locomo-dev5.json; not in this repository).
Leave-one-conversation-out evidence recall at 10 turns of this configuration when they were written:
    R@10 0.822; multi-hop 0.555, temporal 0.929, open-domain 0.581, single-hop 0.897
"""

COEFFICIENTS = {
    "own": 0.763393,
    "z_own": 0.492790,
    "own_question": -0.860269,
    "event": -1.883030,
    "z_event": 0.633684,
    "topic": 1.862739,
    "previous": -0.882614,
    "next": 0.448559,
    "reply": 2.577469,
    "speaker_named": 2.468419,
    "dated_for_when": 1.030904,
    "length": 0.872414,
    "session_own": 2.929470,
    "event_bm25": 1.308215,
    "fact_key": 1.529784,
    "prf": 0.053202,
    "time_match": 3.802211,
    "bm25_stem": 1.497333,
    "window_stem": 1.097384,
    "session_stem": 1.369316,
}
CONTEXT = {
    "own": -2.150284,
    "z_own": -0.338855,
    "own_question": 1.471007,
    "event": -2.069737,
    "z_event": -0.445508,
    "topic": 2.536445,
    "previous": -1.287417,
    "next": -1.689482,
    "reply": -0.916643,
    "speaker_named": -2.406160,
    "dated_for_when": -1.961595,
    "length": -0.411304,
    "session_own": -2.150284,
    "event_bm25": 0.774111,
    "fact_key": 0.605842,
    "prf": -3.837689,
    "time_match": -4.009697,
    "bm25_stem": 0.774111,
    "window_stem": 0.774111,
    "session_stem": 0.774111,
}
INTERCEPT = 0.793118
SESSION_DIVERSITY = 0.0
GATHER_DIVERSITY = 1.0
