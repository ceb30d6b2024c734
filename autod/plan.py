"""The Plan contract (planner -> actor): models and the JSON schema sent to the LLM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Edit(BaseModel):
    """Replace the one occurrence of `search` in `path` by `replace`.

    `search == ""` on a path that does not exist creates the file with `replace`.
    """

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=1024)
    search: str = Field(max_length=200_000)
    replace: str = Field(max_length=200_000)


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=4000)
    edits: list[Edit] = Field(default_factory=list, max_length=1000)
    verify: list[str] = Field(default_factory=list, max_length=100)
    report: str | None = Field(None, max_length=1_000_000)
    # Definitions the model asks to see before it edits ("path::Class.func" or "Class.func"),
    # answered once per cycle from the index under the read rules (autod answers the first few).
    need: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list, max_length=32)


def plan_schema(paths: Sequence[str] | None = None) -> dict[str, Any]:
    """A JSON schema an OpenAI-compatible server accepts for `response_format`.

    `paths`, when given, are the only values `edits[].path` may take: the files the prompt showed
    that the plan may edit. A server that turns the schema into a grammar (llama.cpp) then cannot
    generate an edit of a test or of a file the model never saw; the act rules still judge every
    path whatever the server did with the schema.
    """
    path: dict[str, Any] = {"type": "string"}
    if paths:
        path["enum"] = sorted(set(paths))
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["summary", "edits", "verify", "report", "need"],
        "properties": {
            "summary": {"type": "string"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["path", "search", "replace"],
                    "properties": {
                        "path": path,
                        "search": {"type": "string"},
                        "replace": {"type": "string"},
                    },
                },
            },
            "verify": {"type": "array", "items": {"type": "string"}},
            "report": {"type": ["string", "null"]},
            "need": {"type": "array", "items": {"type": "string"}},
        },
    }
