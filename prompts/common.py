"""Pieces shared by every prompt: how the reply format is stated to the model."""

from __future__ import annotations

import json

from pydantic import BaseModel

__all__ = ["schema_instructions"]


def schema_instructions(schema: type[BaseModel]) -> str:
    """The reply format: one JSON object matching the schema, nothing else."""
    spec = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return (
        f"Reply with exactly one JSON object of type {schema.__name__} matching this JSON schema, "
        f"and nothing else:\n{spec}"
    )
