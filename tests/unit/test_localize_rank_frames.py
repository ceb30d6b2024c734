"""The failure's frames ordered by what the coverage says of each: the stack says where the failure went,
not which of its functions is wrong, and a frame every passing test runs too (an error's constructor,
a dispatcher) is less suspect than one only the failing tests ran."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from autod.localize.index import build_index
from autod.localize.rank import FRAME_WEIGHT, SPECTRUM_BASE, Site, rank
from autod.safety.boundary import Boundary

STACK = '''\
def dispatch(x):
    return convert(x)


def convert(x):
    if x:
        raise error_init(x)
    return x


def error_init(x):
    return ValueError(x)


def other(x):
    return x
'''


def ranked(tmp_path: Path, files: dict[str, str], **kw: object) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    pieces = rank(index, changed={}, tests=[], **kw)  # type: ignore[arg-type]
    return [str(p.symbol) for p in pieces]


def test_a_frame_only_the_failing_tests_ran_comes_before_the_error_constructor_every_test_runs(tmp_path):
    sites = [Site("lib.py", 12, 0), Site("lib.py", 7, 1), Site("lib.py", 2, 2)]
    spectrum = {("lib.py", "error_init"): 0.2, ("lib.py", "convert"): 1.0, ("lib.py", "dispatch"): 0.3}
    got = ranked(tmp_path, {"lib.py": STACK}, sites=sites, spectrum=spectrum)
    assert got[:3] == ["convert", "dispatch", "error_init"]
    # without coverage the stack's own order stands: innermost first
    assert ranked(tmp_path, {"lib.py": STACK}, sites=sites)[:3] == ["error_init", "convert", "dispatch"]


def test_a_frame_the_coverage_did_not_record_keeps_its_place(tmp_path):
    sites = [Site("lib.py", 12, 0), Site("lib.py", 7, 1)]
    spectrum = {("lib.py", "convert"): 1.0, ("lib.py", "other"): 1.0}
    got = ranked(tmp_path, {"lib.py": STACK}, sites=sites, spectrum=spectrum)
    assert got[:3] == ["error_init", "convert", "other"]


def test_a_recursive_function_is_one_piece_and_moves_once(tmp_path):
    src = "def walk(x):\n    return walk(x - 1) if x else top(x)\n\n\ndef top(x):\n    return x\n"
    sites = [Site("lib.py", 2, 0), Site("lib.py", 2, 1), Site("lib.py", 2, 2), Site("lib.py", 6, 3)]
    spectrum = {("lib.py", "walk"): 0.8, ("lib.py", "top"): 0.8}
    got = ranked(tmp_path, {"lib.py": src}, sites=sites, spectrum=spectrum)
    assert got[:2] == ["walk", "top"]  # three frames' worth of moving back would put it behind `top`


@pytest.mark.parametrize("seed", range(40))
def test_a_frame_stays_ahead_of_any_function_the_coverage_alone_ranks_at_its_score_or_lower(tmp_path, seed):
    """Generated stacks: frames of depth 0-19 and functions the failing tests ran, random scores. Each
    frame comes before every non-frame its score matches or beats, and among frames of equal score the
    innermost comes first."""
    rnd = random.Random(seed)
    n = rnd.randint(4, 24)
    src = "".join(f"def f{i}(x):\n    return x\n\n\n" for i in range(n))
    names = [f"f{i}" for i in range(n)]
    framed = rnd.sample(names, rnd.randint(1, min(n - 1, 20)))
    depths = sorted(rnd.sample(range(20), len(framed)))
    grid = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    score = {name: rnd.choice(grid) for name in names}
    sites = [Site("lib.py", names.index(f) * 4 + 2, d) for f, d in zip(framed, depths, strict=True)]
    spectrum = {("lib.py", name): s for name, s in score.items()}
    got = ranked(tmp_path, {"lib.py": src}, sites=sites, spectrum=spectrum)
    place = {name: got.index(name) for name in names if name in got}  # a score of 0: not ranked
    depth = dict(zip(framed, depths, strict=True))
    for f in framed:
        for g in place:
            if g not in depth and score[g] <= score[f]:
                assert place[f] < place[g], (f, g, score[f], score[g])
            if g in depth and score[g] == score[f] and depth[f] < depth[g]:
                assert place[f] < place[g], (f, g, depth[f], depth[g])


def test_the_weight_keeps_frames_on_their_own_scale():
    # a frame of depth 19 and score 0 against a coverage-only function of score 0: still ahead
    assert 1.0 + 19 / 100 + FRAME_WEIGHT < SPECTRUM_BASE + 2.5
