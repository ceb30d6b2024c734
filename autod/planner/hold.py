"""How a server is asked to hold leg one to the definition's lines, and what it was seen to do with it.

Leg one (autod.planner.point) may write only one of the lines `point.offered` gives. Servers spell that
constraint differently, and each ignores the spellings it does not know:

- llama.cpp's servers (llama-cpp-python, llama-server) take a GBNF `grammar` (autod.planner.linechoice);
- vLLM takes `structured_outputs: {"choice": [...]}` from 0.10.2 on, and only that from 0.12;
  before, `guided_choice: [...]`; it logs and ignores fields it does not know, and refuses a request
  that holds two kinds of guided decoding, so only one of the two is sent at a time;
- OpenAI refuses any field it does not know ("Unrecognized request argument supplied: grammar").

So a leg one carries the grammar and one choice field. An answer that is not one of the lines offered
(not cut at its token cap) means the server ignored both: the next leg one carries the other choice
field, and once every spelling has been ignored the server counts as not holding the lines
(`ignored`; the draw order then prices a miss again, autod.candidates.fits). A request refused over
any of them is asked again without all of them, and they are never sent to that server again
(`taken`). A server that ignores every spelling and whose model happens to write an offered line is
not found out; it costs what asking freely costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog

from autod.planner import wire

log = structlog.get_logger(__name__)

__all__ = ["CHOICE_FIELDS", "HOLD_FIELDS", "Hold"]

CHOICE_FIELDS = ("structured_outputs", "guided_choice")  # vLLM's, newest first
HOLD_FIELDS = ("grammar", *CHOICE_FIELDS)


class Hold:
    """One server's way of holding leg one: which fields to send, and whether it holds at all."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.taken = True  # until a request holding them is refused (leg one then asked freely)
        self.ignored = False  # every spelling sent and an answer seen outside each
        self.field = CHOICE_FIELDS[0]  # the choice field sent next

    @property
    def held(self) -> bool:
        """Leg one's answer is held to the offered lines here, as far as has been seen."""
        return self.taken and not self.ignored

    def put(self, body: dict[str, Any], grammar: str, lines: Sequence[str]) -> None:
        """Add the grammar and the choice field to a /completions `body`, unless refused before."""
        if not self.taken:
            return
        body["grammar"] = grammar
        if self.ignored or not lines:
            return
        body[self.field] = {"choice": list(lines)} if self.field == "structured_outputs" else list(lines)

    @staticmethod
    def sent(body: dict[str, Any]) -> bool:
        return any(name in body for name in HOLD_FIELDS)

    def refused(self, status: int, data: bytes) -> bool:
        """The server refused a request over one of the fields: none is sent to it again."""
        if not wire.refuses_hold(status, data, HOLD_FIELDS):
            return False
        self.taken = False
        return True

    def outside(self) -> None:
        """An answer was seen outside the lines offered: the next choice field, or none left."""
        later = CHOICE_FIELDS[CHOICE_FIELDS.index(self.field) + 1:]
        if later:
            log.info("llm.choice_field_switched", endpoint=self.url, ignored=self.field, now=later[0])
            self.field = later[0]
        else:
            self.ignored = True
