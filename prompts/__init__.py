"""Prompt templates, one module per LLM role: the typed response model beside the message builder.

Each module has a ``VERSION`` that changes whenever its wording or schema changes.
"""

from logicmap.prompts.common import schema_instructions

__all__ = ["schema_instructions"]
