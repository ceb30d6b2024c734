"""What each pytest session's recorder heard, told to autod the moment it heard it.

The recorder (autod.checks.judge_plugin) shares its process with the code under test, so whatever it
still holds when the session ends, the code under test could have rewritten: a later test reaching it
through pytest's plugin manager set the failing test's phases to passed, or dropped it, and zeroed the
failure count, and the sealed record said fixed. So a check run that loads the recorder also gets a
channel: one end of a `SOCK_SEQPACKET` socket pair, inherited by the check's processes (its descriptor
and inode in `$_AUTOD_JUDGE_HEARD`), the other end read by autod while the check runs. A recorder that
holds it tells autod, on import (before any of the project's code has run), that its session has a
channel (`hello`, with its record's fingerprint), then each phase of each test as it is reported
(`phase`), each call it saw raise (`raised`), what each test ran as its call began (`ran`, a digest of
its function and the names it reads) and each change of the runner it names (`runner`, with whether
it is foreign: autod.checks.judge_path has the hooks on a test's way), which count whatever its record
says of them later. What was sent can be neither taken back nor run into:
the messages are in autod's hands, each whole.

A session that said hello is judged by what it told (`outcomes`, by the recorder's own rule: its
protocol ran to its end, or it failed) together with its sealed record (`judged`): a test counts as
anything short of failed only when both say so, and then as the worse of the two; a failure either
names counts. Its record saying passed for a test whose failure was told, or for a test never told at
all, changes nothing. Anybody in the check's processes can write to the channel too, but a message
can only worsen the session it names, so a forged one only hurts the forger. More than
autod reads (`MAX_BYTES`, each message counted at least `MIN_COUNTED`; a message longer than
`MAX_MESSAGE`) is a failed run.

Sessions whose process never held the channel (a pytest a check or a test started with its descriptors
closed: `subprocess` closes them) are judged by their sealed record alone, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from autod.safety import safejson

__all__ = ["ENV", "Channel", "Heard", "judged", "listening", "open_channel", "outcomes"]

ENV = "_AUTOD_JUDGE_HEARD"
MAX_MESSAGE = 1 << 16  # bytes of one message (a phase of a test with a very long id, told as JSON)
MAX_BYTES = 32 << 20  # all messages of one check run together
# each message counts at least this much of MAX_BYTES: a flood of 1-byte messages (3 million took a check
# from 1 s to 79 s and autod to 218 MB) is held to 524,288 messages; the recorder's are ~60-300 bytes
MIN_COUNTED = 64
_RANK = {"passed": 0, "xpassed": 1, "xfailed": 2, "skipped": 3, "failed": 4, "error": 5}
_FAILING = ("failed", "error")
MAX_LABELS = 4096  # runner changes heard from one session (the recorder tells 1,000, and each foreign one)
OVERFLOW = "more runner changes told than autod reads"
_PER_WAKE = 256  # messages read each time the loop finds the socket readable


@dataclass
class Channel:
    """One check run's channel: autod's end (read), the check's end (handed to its processes)."""

    ours: socket.socket
    theirs: socket.socket
    messages: list[bytes] = field(default_factory=list)
    size: int = 0
    overflowed: bool = False

    def env(self) -> dict[str, str]:
        fd = self.theirs.fileno()
        return {ENV: f"{fd}:{os.fstat(fd).st_ino}"}

    def pass_fds(self) -> tuple[int, ...]:
        return (self.theirs.fileno(),)

    def take(self, data: bytes) -> None:
        if self.overflowed:
            return
        counted = max(len(data), MIN_COUNTED)
        if len(data) > MAX_MESSAGE or self.size + counted > MAX_BYTES:
            self.overflowed, self.messages = True, []
            return
        if data:  # an empty message says nothing (and reads like the end of a stream)
            self.size += counted
            self.messages.append(data)

    def drain(self, most: int = -1) -> None:
        """Take the messages waiting now, `most` of them at most (-1: all); never blocks."""
        while most != 0 and not self.overflowed:
            most -= 1
            try:
                data = self.ours.recv(MAX_MESSAGE + 1)
            except OSError:  # nothing waiting (BlockingIOError), or the socket is gone
                return
            if not data:
                return  # the check's end is closed and nothing is left
            self.take(data)

    def close(self) -> None:
        for s in (self.ours, self.theirs):
            s.close()


def open_channel() -> Channel:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    return Channel(ours, theirs)


@contextlib.asynccontextmanager
async def listening(channel: Channel | None) -> AsyncIterator[None]:
    """Read the channel while the check runs (so no recorder ever waits on a full socket), and what is
    left when it has ended; the check's end is closed after, in autod."""
    if channel is None:
        yield
        return
    loop = asyncio.get_running_loop()
    fd = channel.ours.fileno()

    def readable() -> None:
        channel.drain(_PER_WAKE)  # a little at a time: a check that floods it never holds the loop
        if channel.overflowed:
            loop.remove_reader(fd)  # failed run already; its writers wait until it is killed

    loop.add_reader(fd, readable)
    try:
        yield
    finally:
        loop.remove_reader(fd)
        channel.theirs.close()
        channel.drain()


@dataclass(frozen=True)
class Heard:
    """What the channel said: the sessions that said hello, and each one's tests as told."""

    sessions: frozenset[str]
    tests: dict[str, dict[str, str]]  # fingerprint -> nodeid -> outcome
    runner: dict[str, frozenset[str]] = field(default_factory=dict)  # fingerprint -> runner changes
    foreign: dict[str, frozenset[str]] = field(default_factory=dict)  # of them, the foreign ones
    ran: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)  # fp -> nodeid -> digests


def outcomes(messages: Iterable[bytes]) -> Heard:
    """Each session's tests from its messages, by the recorder's rule: a phase's outcome is the worst
    told for it; a call told raised is not passed; a test is heard when its call (or a skip in its
    setup) and its teardown were told, or when any phase failed."""
    hello: set[str] = set()
    phases: dict[str, dict[str, dict[str, str]]] = {}
    raised: set[tuple[str, str]] = set()
    runner: dict[str, set[str]] = {}
    foreign: dict[str, set[str]] = {}
    ran: dict[str, dict[str, set[str]]] = {}
    for data in messages:
        try:
            msg = safejson.loads(data)
        except ValueError:
            continue
        if not isinstance(msg, list) or not msg or not all(isinstance(x, str) for x in msg):
            continue
        match msg:
            case ["hello", fp]:
                hello.add(fp)
            case ["phase", fp, nodeid, when, outcome] if outcome in _RANK:
                now = phases.setdefault(fp, {}).setdefault(nodeid, {}).get(when)
                if now is None or _RANK[outcome] > _RANK[now]:
                    phases[fp][nodeid][when] = outcome
            case ["raised", fp, nodeid]:
                raised.add((fp, nodeid))
            case ["ran", fp, nodeid, digest]:
                ran.setdefault(fp, {}).setdefault(nodeid, set()).add(digest)
            case ["runner", fp, label, how]:
                if len(runner.setdefault(fp, set())) >= MAX_LABELS:  # a flood: nothing it says is trusted
                    label, how = OVERFLOW, "foreign"
                runner[fp].add(label)
                if how:
                    foreign.setdefault(fp, set()).add(label)
    tests: dict[str, dict[str, str]] = {}
    for fp in hello:
        tests[fp] = {}
        for nodeid, told in phases.get(fp, {}).items():
            if (fp, nodeid) in raised and told.get("call") in ("passed", "xpassed"):
                told = {**told, "call": "failed"}
            worst = max(told.values(), key=_RANK.__getitem__)
            ended = "teardown" in told and ("call" in told or told.get("setup") in ("skipped", "xfailed"))
            if ended or worst in _FAILING:
                tests[fp][nodeid] = worst
    return Heard(frozenset(hello), tests, {fp: frozenset(runner.get(fp, ())) for fp in hello},
                 {fp: frozenset(foreign.get(fp, ())) for fp in hello},
                 {fp: {t: frozenset(d) for t, d in ran.get(fp, {}).items()} for fp in hello})


def judged(record: dict[str, str], told: dict[str, str]) -> dict[str, str]:
    """A session's tests when it had a channel: those it told, each the worse of what it told and what
    its record says. A test counts as anything short of failed only when both heard it end (a message
    anyone in the process could have sent cannot finish a test its recorder never heard finish); a
    failure either of them names counts."""
    out = {}
    for nodeid, outcome in told.items():
        said = record.get(nodeid)
        if said not in _RANK:
            if outcome in _FAILING:
                out[nodeid] = outcome
            continue
        out[nodeid] = said if _RANK[said] > _RANK[outcome] else outcome
    for nodeid, said in record.items():
        if nodeid not in out and said in _FAILING:
            out[nodeid] = said
    return out
