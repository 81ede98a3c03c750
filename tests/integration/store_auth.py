"""LangGraph auth for ``test_store_auth.py``'s ``langgraph dev``: the bearer token is the user's identity; a request
without one (the fixture's readiness probe) is the user ``anonymous``."""

from __future__ import annotations

from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    if not authorization:
        return "anonymous"
    if not authorization.startswith("Bearer ") or not authorization[7:].isalnum():
        raise Auth.exceptions.HTTPException(status_code=401, detail="a bearer token is required")
    return authorization[7:]
