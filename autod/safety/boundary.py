"""The trust boundary on files: what a plan may write and what may be read into a prompt, memory or report.

One set of rules serves both directions (the architecture's act rules, applied to reads too):
- the resolved real path lies inside the workspace (no `..`, absolute paths or symlinks for writes;
  reads follow a symlink only to a target that passes every rule itself);
- never `.git`, never autod's temp files;
- never a credential file: the built-in list (`autod.safety.protected.CREDENTIAL_GLOBS`: `.env`, keys,
  cloud, registry and cluster credentials, ...) and the operator's `limits.deny_globs`;
- never autod's own files: the state dir, the config file it loaded and every file on the config
  search path, the installed units and the environment/credential files;
- for writes only: never a file that makes a tool run code later (`autod.safety.protected.RUNS_CODE_GLOBS`:
  `*.pth`, virtualenvs, editor/CI/build/container files, ...) nor the operator's
  `limits.no_write_globs`.
`limits.allow_globs` exempts a path from the two built-in lists, never from the rest.

Nothing here writes. `resolve` raises PlanRejected naming the path and the rule; `readable` answers
with the normalised relative path or None.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from autod.errors import PlanRejected
from autod.linebreaks import lines_of
from autod.safety.protected import CREDENTIAL_GLOBS, RUNS_CODE_GLOBS
from autod.safety.saferead import read_untrusted

if TYPE_CHECKING:
    from autod.config.settings import Settings

TMP_MARKER = ".autod-tmp-"
_SHOWN_PATH = 200  # characters of a path an error message shows
_BINARY_SNIFF = 8192  # a NUL within the first bytes of a file makes it binary
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")

# Installed by deploy/install.sh or by hand per docs/OPERATIONS.md: never a plan's to change or read.
INSTALLED_FILES = (
    "/etc/autod",
    "/etc/systemd/system/autod.service",
    "/etc/systemd/system/autod@.service",
    "/etc/systemd/system/autod.service.d",
    "/etc/logrotate.d/autod",
    "/usr/local/bin/autod",
    "/opt/autod",
    "~/.config/systemd/user/autod.service",
    "~/.config/autod",
)


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """fnmatch-style glob with `**`: `*` and `?` stay inside one component, `**/` spans zero or more."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1  # as fnmatch: a `]` first in the class (after a `!`) is one of its characters
            if pattern[j : j + 1] == "!":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1
            j = pattern.find("]", j)
            if j < 0:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"(?!/)[{body}]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    # Case-insensitive: denying `KEY.PEM` too is the safe side of the trade.
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def glob_match(pattern: str, rel: str) -> bool:
    """True if the glob covers `rel` (a posix path relative to the workspace).

    A pattern without `/` matches any single component (`.env`, `*.pem`, `secrets`); a pattern
    with `/` matches the whole path or any ancestor directory of it (`**/secrets/**`, `build/*`).
    """
    pattern = pattern.strip().strip("/")
    if not pattern:
        return False
    rx = _glob_regex(pattern)
    parts = rel.split("/")
    if "/" not in pattern:
        return any(rx.fullmatch(part) for part in parts)
    return any(rx.fullmatch("/".join(parts[:k])) for k in range(1, len(parts) + 1))


def own_files(settings: Settings) -> list[Path]:
    """autod's own files and directories for these settings (absolute, not necessarily existing)."""
    from autod.config.settings import SEARCH_PATHS

    paths: list[Path] = [settings.state_path, settings.log_file]
    if settings.config_file is not None:
        paths.append(settings.config_file)
    env_config = os.environ.get("AUTOD_CONFIG")
    if env_config:
        paths.append(Path(env_config))
    paths += [Path(p) for p in SEARCH_PATHS]  # relative ones: against the directory autod runs in
    if settings.llm.api_key_file is not None:
        paths.append(settings.llm.api_key_file)
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if creds:
        paths.append(Path(creds))
    paths += [Path(p).expanduser() for p in INSTALLED_FILES]
    out: list[Path] = []
    for p in paths:
        try:
            real = Path(os.path.realpath(p.expanduser()))
        except (OSError, ValueError):
            continue
        if real not in out:
            out.append(real)
    return out


def config_inside_workspace(settings: Settings) -> str | None:
    """The warning an operator sees when the loaded config file lives inside the workspace, else None."""
    cfg = settings.config_file
    if cfg is None:
        return None
    real, ws = Path(os.path.realpath(cfg)), Path(os.path.realpath(settings.workspace))
    if ws not in real.parents:
        return None
    return (
        f"the config {real} lives inside the workspace: a plan can never edit it (autod's own files are"
        " never plan targets), but a human commit can; review changes to it as you would code, or move it"
        " out of the workspace (e.g. /etc/autod/autod.yaml)"
    )


class Boundary:
    """Maps plan paths to real paths inside the workspace, or refuses them; decides what may be read."""

    def __init__(
        self,
        workspace: Path,
        state_dir: Path,
        deny_globs: Sequence[str],
        own: Iterable[Path] = (),
        *,
        no_write_globs: Sequence[str] = (),
        allow_globs: Sequence[str] = (),
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        if not self.workspace.is_dir():
            raise ValueError(f"workspace is not a directory: {workspace}")
        self.state_dir = Path(os.path.realpath(state_dir))
        self.deny_globs = tuple(deny_globs)  # the operator's, on top of CREDENTIAL_GLOBS
        self.no_write_globs = tuple(no_write_globs)  # the operator's, on top of RUNS_CODE_GLOBS
        self.allow_globs = tuple(allow_globs)  # exempt from the two built-in lists only
        # An "own" entry that is the workspace or contains it would deny everything: autod's own files
        # are the ones inside it (e.g. ./config/autod.yaml), never the tree it works on.
        real_own = (Path(os.path.realpath(p)) for p in own)
        self.own = tuple(p for p in real_own if p != self.workspace and p not in self.workspace.parents)

    @classmethod
    def for_settings(cls, settings: Settings) -> Boundary:
        lim = settings.limits
        return cls(
            settings.workspace,
            settings.state_path,
            lim.deny_globs,
            own_files(settings),
            no_write_globs=lim.no_write_globs,
            allow_globs=lim.allow_globs,
        )

    # -- writes ------------------------------------------------------------------------
    def resolve(self, rel: str) -> tuple[str, Path]:
        """(normalised rel, real absolute path) for a write; raises PlanRejected naming the path and rule."""
        shown = show_path(rel)
        if not isinstance(rel, str) or not rel.strip():
            raise PlanRejected("edit path is empty")
        if "\x00" in rel:
            raise PlanRejected(f"{shown}: path contains a NUL byte")
        if _CONTROL.search(rel):
            raise PlanRejected(f"{shown}: path contains control characters")
        if "\\" in rel:
            raise PlanRejected(f"{shown}: backslashes are not allowed in paths")
        if rel.startswith(("/", "~")) or _DRIVE.match(rel):
            raise PlanRejected(f"{shown}: absolute or home-relative path is outside the workspace")
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts:
            raise PlanRejected(f"{shown}: path names the workspace itself")
        if ".." in parts:
            raise PlanRejected(f"{shown}: '..' is not allowed in paths")
        norm = "/".join(parts)
        why = self._denied(norm) or self._unwritable(norm)
        if why:
            raise PlanRejected(f"{norm}: {why}")
        path = self.workspace.joinpath(*parts)
        check_chain(self.workspace, norm)
        # Belt and braces: whatever the walk above concluded, the real parent must be inside.
        real_parent = Path(os.path.realpath(path.parent))
        if real_parent != self.workspace and self.workspace not in real_parent.parents:
            raise PlanRejected(f"{norm}: resolves outside the workspace")
        why = self._own(path) or self._own(Path(os.path.realpath(path)))
        if why:
            raise PlanRejected(f"{norm}: {why}")
        return norm, path

    # -- reads -------------------------------------------------------------------------
    def readable(self, path: str | os.PathLike[str]) -> str | None:
        """The normalised workspace-relative path if it may be read into a prompt/memory/report, else None.

        `path` may be absolute (a traceback frame) or relative to the workspace. A symlink is followed
        only when both its own path and its target pass every rule.
        """
        raw = str(path)
        if not raw or "\x00" in raw:
            return None
        p = Path(raw).expanduser()
        if not p.is_absolute():
            p = self.workspace / p
        lexical = Path(os.path.normpath(p))
        real = Path(os.path.realpath(lexical))
        rels = []
        for candidate in (lexical, real):
            if candidate != self.workspace and self.workspace not in candidate.parents:
                return None
            rels.append(candidate.relative_to(self.workspace).as_posix())
        for rel in rels:
            if self._denied(rel):
                return None
        if self._own(lexical) or self._own(real):
            return None
        return rels[1]

    def read_text(self, path: str | os.PathLike[str], *, max_bytes: int = 2_000_000) -> str | None:
        """The file's text when `readable` allows it and it is a regular UTF-8-ish file; else None."""
        rel = self.readable(path)
        if rel is None:
            return None
        try:  # a FIFO a check left here is refused at once, never waited on
            data = read_untrusted(self.workspace / rel, cap=max_bytes)
        except OSError:
            return None
        if b"\x00" in data[:_BINARY_SNIFF]:
            return None  # binary
        return data.decode("utf-8", "replace")

    def filter_diff(self, diff: str) -> str:
        """A `git diff` without the sections of files that may not be read (a tracked `.env`, a key...)."""
        out: list[str] = []
        keep = True
        for line in lines_of(diff, keepends=True):
            if line.startswith("diff --git "):
                paths = _diff_paths(line[len("diff --git ") :].rstrip("\r\n"))
                keep = bool(paths) and all(self.readable(p) is not None for p in paths)
            if keep:
                out.append(line)
        return "".join(out)

    # -- the rules ---------------------------------------------------------------------
    def _denied(self, norm: str) -> str | None:
        parts = norm.split("/")
        if any(p.lower() == ".git" for p in parts):
            return ".git is never edited or read"
        if TMP_MARKER in parts[-1]:
            return "autod temp files are never edited"
        for pattern in self.deny_globs:
            if glob_match(pattern, norm):
                return f"denied by glob {pattern!r} (limits.deny_globs)"
        for pattern in CREDENTIAL_GLOBS:
            if glob_match(pattern, norm) and not self._allowed(norm):
                return (
                    f"denied by glob {pattern!r}: a credential file is never read or edited"
                    " (limits.allow_globs exempts a file)"
                )
        return None

    def _unwritable(self, norm: str) -> str | None:
        for pattern in self.no_write_globs:
            if glob_match(pattern, norm):
                return f"denied by glob {pattern!r} (limits.no_write_globs): never edited by a plan"
        for pattern in RUNS_CODE_GLOBS:
            if glob_match(pattern, norm) and not self._allowed(norm):
                return (
                    f"denied by glob {pattern!r}: a file that makes tools run code later is never edited"
                    " by a plan - change the project's own source instead (limits.allow_globs exempts a file)"
                )
        return None

    def _allowed(self, norm: str) -> bool:
        return any(glob_match(pattern, norm) for pattern in self.allow_globs)

    def _own(self, path: Path) -> str | None:
        state = self.state_dir
        if path == state or state in path.parents:
            return "inside autod's state dir"
        for own in self.own:
            if path == own or own in path.parents:
                return "one of autod's own files (its config, state or installed units): never a plan target"
        return None


def check_chain(workspace: Path, rel: str) -> None:
    """Walk rel from the workspace: no symlink anywhere, directories on the way, a regular file at the end.

    Components that do not exist yet are fine (a creation). Raises PlanRejected.
    """
    parts = rel.split("/")
    cur = workspace
    for i, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return  # the rest does not exist yet: parents are made inside the workspace
        except OSError as e:
            raise PlanRejected(f"{rel}: cannot inspect path ({e.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            raise PlanRejected(f"{rel}: symlinks are never followed or edited")
        last = i == len(parts) - 1
        if not last and not stat.S_ISDIR(st.st_mode):
            raise PlanRejected(f"{rel}: a parent is not a directory")
        if last and not stat.S_ISREG(st.st_mode):
            raise PlanRejected(f"{rel}: not a regular file")


# possessive: a name's characters and escapes have one reading, kept without a backtracking entry each
_QUOTED_PAIR = re.compile(r'^"a/((?:[^"\\]++|\\.)*+)" "b/((?:[^"\\]++|\\.)*+)"$')


def _diff_paths(rest: str) -> list[str]:
    """The a/ and b/ paths of a `diff --git` header; [] when it cannot be parsed (the section is dropped)."""
    m = _QUOTED_PAIR.match(rest)
    if m:  # git C-quotes names with special characters; their escapes only widen what is refused
        return [m.group(1), m.group(2)]
    if not rest.startswith("a/"):
        return []
    splits = [i for i in range(len(rest)) if rest.startswith(" b/", i)]
    for i in splits:  # unquoted names may hold " b/": the split where both sides agree, else the first
        if rest[2:i] == rest[i + 3 :]:
            return [rest[2:i]]
    return [rest[2 : splits[0]], rest[splits[0] + 3 :]] if splits else []


def show_path(rel: object) -> str:
    """A path for an error message: printable and short."""
    text = repr(rel) if not isinstance(rel, str) else rel
    text = _CONTROL.sub("?", text)
    return text if len(text) <= _SHOWN_PATH else text[:_SHOWN_PATH] + "..."
