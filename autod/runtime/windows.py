"""What autod learnt of its LLM servers, kept in the state db: their context windows and their pace.

llama-cpp-python states its context size nowhere: autod learns it from the first reply the server cut
short (or a context error), after a whole prompt's evaluation, minutes on a CPU. Kept here, a restart
or a config reload (which builds a new planner) does not pay that again. The characters per token the
server's replies measured are kept beside it: a restart's first prompt is then sized in the server's
own tokens, not in an estimate that code overruns. A kept window is trusted for a day: a server
restarted with a larger context is then learnt afresh (`llm.context_tokens` in the config overrides
it at once). The server's own word (GET /props) always comes before what was kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from autod.planner import CHARS_PER_TOKEN
from autod.planner.pace import Speeds
from autod.planner.window import Window, plausible

KEY = "llm_context_tokens:"  # + Endpoint.key (url|model)
KEEP_S = 86_400
PACE_KEY = "llm_pace:"  # + Endpoint.key
PACE_KEEP_S = 7 * 86_400
# the unit the kept speeds are in: seconds a token of this many characters (autod.planner.pace); a record
# without it was kept in the server's own tokens by an older autod, and is measured anew
PACE_UNIT = "chars_per_token"


class KeptWindows:
    """autod.planner.endpoint.WindowMemory over the state db (its calls run off the event loop)."""

    def __init__(self, state: Any, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock

    async def recall(self, key: str) -> Window | None:
        doc = await self.state.call(self.state.get_kv, KEY + key)
        if not isinstance(doc, dict):
            return None
        tokens, at, ratio = doc.get("tokens"), doc.get("at"), doc.get("chars_per_token")
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 512:
            return None
        if not isinstance(at, int | float) or not 0 <= self.clock() - at < KEEP_S:
            return None
        # absent (kept by an older autod) or not a tokenizer's: estimate as usual
        return Window(tokens, float(ratio) if plausible(ratio) else None)

    async def keep(self, key: str, window: Window) -> None:
        doc: dict[str, Any] = {"tokens": int(window.tokens), "at": self.clock()}
        if window.chars_per_token is not None:
            doc["chars_per_token"] = round(window.chars_per_token, 3)
        await self.state.call(self.state.set_kv, KEY + key, doc)


class KeptPace:
    """autod.planner.pace.PaceMemory over the state db (its calls run off the event loop)."""

    def __init__(self, state: Any, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock

    async def recall_pace(self, key: str) -> Speeds | None:
        doc = await self.state.call(self.state.get_kv, PACE_KEY + key)
        if not isinstance(doc, dict):
            return None
        at, read_s, write_s = doc.get("at"), doc.get("read_s"), doc.get("write_s")
        if not isinstance(at, int | float) or not 0 <= self.clock() - at < PACE_KEEP_S:
            return None
        if doc.get(PACE_UNIT) != CHARS_PER_TOKEN:
            return None
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (read_s, write_s)):
            return None
        speeds = Speeds(float(read_s), float(write_s))  # type: ignore[arg-type]
        return speeds if speeds.plausible() else None

    async def keep_pace(self, key: str, speeds: Speeds) -> None:
        doc = {"read_s": speeds.read_s, "write_s": speeds.write_s, "at": self.clock(),
               PACE_UNIT: CHARS_PER_TOKEN}
        await self.state.call(self.state.set_kv, PACE_KEY + key, doc)
