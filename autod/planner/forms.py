"""The words of a reply form: what autod tells the model, at each turn, about how to write its plan.

`json` is the JSON plan (a schema, a grammar on llama.cpp); `code` is the code reply form (headers
and fenced blocks, autod.planner.codeform). Every turn that names the form takes its words from here,
so a form is worded in one place: the user prompt's last line, the need round's "now reply", the
nudge after a reply cut at the cap, and the repair round.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FORMS", "ReplyForm"]


@dataclass(frozen=True)
class ReplyForm:
    name: str
    reply_line: str  # the last line of auto-debug's user prompt
    need_then: str  # after the need round's answer
    length_nudge: str  # after a reply cut off at the reply cap
    repair: str  # the repair round, `{reason}` what was wrong with the reply

    def repair_message(self, reason: str) -> str:
        return self.repair.format(reason=reason.rstrip(". "))


FORMS = {
    "json": ReplyForm(
        name="json",
        reply_line="Reply with the JSON plan only.",
        need_then="Now reply with the JSON plan and your edits. `need` is not answered again: leave it "
        "empty.",
        length_nudge="Your previous reply was cut off by the length limit. Reply with one complete JSON "
        "object only: fewer, smaller edits and a shorter summary.",
        repair="Your reply was not a valid plan: {reason}. Reply with only the JSON object.",
    ),
    "code": ReplyForm(
        name="code",
        reply_line="Reply with one or two sentences, then the header line and the complete definition in "
        "a ```python block.",
        need_then="Now reply with your fix: one sentence, then `### path · symbol` and the complete new "
        "definition in a ```python block. NEED is not answered again.",
        length_nudge="Your previous reply was cut off by the length limit. Reply again with one short "
        "sentence, then only the one definition you change, complete, under its `### path · symbol` "
        "header.",
        repair="autod could not use your reply: {reason}. Reply again in the form asked: one sentence, "
        "then `### path · symbol` and the definition's complete new source in a ```python block.",
    ),
}
