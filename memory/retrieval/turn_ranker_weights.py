"""Weights of the graph-feature reranker (``memory.retrieval.ranking``), written by ``python -m logicmap.evals.loco``.

Fitted on 2026-11-27 (logistic regression, balanced classes, C=1, with the question's context:
CONTEXT weighs each feature's best value over the question's turns; evals.loco.design) on the public LoCoMo
conversations conv-26, conv-30, conv-41, conv-42, conv-43 (../shared/data/locomo-dev5.json; not in this repository).
Leave-one-conversation-out evidence recall at 10 turns of this configuration when they were written:
    R@10 0.813; multi-hop 0.527, temporal 0.929, open-domain 0.570, single-hop 0.892
"""

COEFFICIENTS = {
    "own": 0.591282,
    "z_own": 0.635657,
    "own_question": -1.884741,
    "event": -1.505117,
    "z_event": 0.573199,
    "topic": 2.286384,
    "previous": -0.954401,
    "next": 0.475665,
    "reply": 2.631764,
    "bm25": 1.193013,
    "speaker_named": 2.422078,
    "dated_for_when": 1.109184,
    "length": 0.937493,
    "session_own": 3.385635,
    "session_bm25": 1.283001,
    "event_bm25": 1.192525,
    "window_bm25": 1.172809,
    "fact_key": 1.447972,
    "prf": 0.272134,
    "time_match": 3.626157,
}
CONTEXT = {
    "own": -2.018343,
    "z_own": -0.401866,
    "own_question": 1.276906,
    "event": -2.669043,
    "z_event": -0.387326,
    "topic": 2.689135,
    "previous": -1.695317,
    "next": -1.566871,
    "reply": -0.457201,
    "bm25": 0.355518,
    "speaker_named": -2.342525,
    "dated_for_when": -1.958592,
    "length": -0.146779,
    "session_own": -2.018343,
    "session_bm25": 0.355518,
    "event_bm25": 0.355518,
    "window_bm25": 0.355518,
    "fact_key": 0.627940,
    "prf": -3.018579,
    "time_match": -3.811621,
}
INTERCEPT = 0.351181
SESSION_DIVERSITY = 0.0
GATHER_DIVERSITY = 0.5
