"""What `autod config check` says about delivery beyond the schema: a mode that delivers to a branch or a
patch needs a git repository with a commit, the workspace's mirror (bwrap, no check with `sandbox: off`,
`candidates.isolation` not off), and the remote it pushes to."""

from __future__ import annotations

from autod.config.errors import Problem
from autod.config.settings import Settings
from autod.delivery import plumbing as g


def problems(settings: Settings) -> list[Problem]:
    from autod.checks import sandbox

    out: list[Problem] = []
    isolated = [m for m in settings.modes.enabled() if settings.modes.get(m).delivery != "worktree"]
    for mode in isolated:
        key = ("modes", mode, "delivery")
        kind = settings.modes.get(mode).delivery
        if not g.is_repo(settings.workspace) or g.rev(settings.workspace, "HEAD") is None:
            out.append(
                Problem(key, f"{kind} delivery needs a git repository with a commit (it starts from HEAD)")
            )
        why = None
        if settings.candidates.isolation == "off":
            why = "candidates.isolation is off"
        elif settings.checks_sandbox == "off" or any(c.sandbox == "off" for c in settings.checks.values()):
            why = "a check runs with sandbox: off"
        else:
            verdict = sandbox.probe()
            if not verdict.works:
                why = f"the bwrap sandbox does not work here ({verdict.why})"
        if why is not None:
            out.append(
                Problem(
                    key,
                    f"{kind} delivery verifies fixes on the workspace's mirror, mounted by bwrap;"
                    f" {why}, so nothing would be verified or delivered",
                )
            )
    remote = settings.delivery.push
    if remote:
        if not any(settings.modes.get(m).delivery == "branch" for m in isolated):
            out.append(
                Problem(("delivery", "push"), "no mode delivers to a branch: nothing is pushed", error=False)
            )
        elif g.is_repo(settings.workspace) and not g.has_remote(settings.workspace, remote):
            out.append(Problem(("delivery", "push"), f"the repository has no remote named {remote!r}"))
    return out
