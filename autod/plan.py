"""The Plan contract (planner -> actor): models and the JSON schema sent to the LLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator


class Edit(BaseModel):
    """One edit of one file, in one of two forms.

    - whole definition: `symbol` names a definition in `path` (`func`, `Class.method`, `CONST`) and
      `replace` is its complete new source (autod.act.definition);
    - search/replace: the one occurrence of `search` in `path` becomes `replace`; `search == ""` on a
      path that does not exist creates the file with `replace`.
    """

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=1024)
    symbol: str | None = Field(None, max_length=300)
    search: str = Field("", max_length=200_000)
    replace: str = Field(max_length=200_000)

    @model_validator(mode="after")
    def _one_form(self) -> Edit:
        # an edit names what it changes: a definition (`symbol`) or the text to find (`search`, which may
        # be "" only to create a file); one with neither is a model's slip worth a repair round
        if "search" not in self.model_fields_set and not self.whole_definition:
            raise ValueError("give `symbol` (a definition shown whole) or `search` (text now in the file)")
        return self

    @property
    def whole_definition(self) -> bool:
        return bool(self.symbol and self.symbol.strip())


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=4000)
    edits: list[Edit] = Field(default_factory=list, max_length=1000)
    verify: list[str] = Field(default_factory=list, max_length=100)
    report: str | None = Field(None, max_length=1_000_000)
    # Definitions the model asks to see before it edits ("path::Class.func" or "Class.func"),
    # answered once per cycle from the index under the read rules (autod answers the first few).
    need: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list, max_length=32)
    # blocks of the prompt's own code a code-form reply gave back unchanged (autod.planner.codeform):
    # not part of the schema, never sent nor stored; a plan with no edit and some is an echo
    _quotes: int = PrivateAttr(0)

    @property
    def echoed(self) -> bool:
        """Whether the reply gave the prompt's code back and proposed no edit."""
        return self._quotes > 0 and not self.edits

    def with_quotes(self, n: int) -> Plan:
        self._quotes = n
        return self


def plan_schema(
    paths: Sequence[str] | None = None, symbols: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """A JSON schema an OpenAI-compatible server accepts for `response_format`.

    An edit is one of two shapes, the whole-definition one first (a small model rewrites a function
    more reliably than it copies a search text): `{path, symbol, replace}` or `{path, search, replace}`.
    `paths`, when given, are the only values `path` may take (the files the prompt showed that the plan
    may edit); `symbols` (path -> qualnames shown whole) narrow each file's `symbol` to its own
    definitions. A server that turns the schema into a grammar (llama.cpp) then cannot name a test, a
    file the model never saw, or a definition that is not in the file; the act rules still judge every
    edit whatever the server did with the schema.
    """
    path: dict[str, Any] = {"type": "string"}
    if paths:
        path["enum"] = sorted(set(paths))
    whole: list[dict[str, Any]] = []
    for p, names in sorted((symbols or {}).items()):
        if (paths and p not in paths) or not names:
            continue
        whole.append(_edit_shape({"type": "string", "enum": [p]}, "symbol",
                                 {"type": "string", "enum": sorted(set(names))}))
    if not whole:
        whole = [_edit_shape(path, "symbol", {"type": "string"})]
    items = {"anyOf": [*whole, _edit_shape(path, "search", {"type": "string"})]}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["summary", "edits", "verify", "report", "need"],
        "properties": {
            "summary": {"type": "string"},
            "edits": {"type": "array", "items": items},
            "verify": {"type": "array", "items": {"type": "string"}},
            "report": {"type": ["string", "null"]},
            "need": {"type": "array", "items": {"type": "string"}},
        },
    }


def _edit_shape(path: dict[str, Any], key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", key, "replace"],
        "properties": {"path": path, key: value, "replace": {"type": "string"}},
    }
