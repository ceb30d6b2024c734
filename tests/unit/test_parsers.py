"""Build-error parsers over real tool output samples in tests/data/logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from autod.sources.parsers import parse_failures, parse_locations, scan_bytes, scan_failures

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def sample(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "detector", "summaries", "first_location"),
    [
        (
            "pytest_failures.txt",
            "pytest",
            [
                "pytest: FAILED tests/test_calc.py::test_add - assert 4 == 3",
                "pytest: FAILED tests/test_calc.py::test_div - ZeroDivisionError: division by zero",
            ],
            {"path": "tests/test_calc.py", "line": 7},
        ),
        (
            "pytest_collection_error.txt",
            "pytest",
            [
                "pytest: ERROR tests/test_broken.py - "
                "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"
            ],
            None,
        ),
        (
            "python_traceback_chained.txt",
            "python-traceback",
            ["python: RuntimeError: config missing (at /tmp/samp/crash.py:9)"],
            {"path": "/tmp/samp/crash.py", "line": 7},
        ),
        (
            "mypy.txt",
            "mypy",
            [
                'mypy: src/calc.py:12: error: Incompatible return value type (got "str", expected "int") '
                "[return-value]",
                'mypy: src/app/models.py:45: error: Argument 1 to "save" of "Store" '
                'has incompatible type "int"; expected "str" [arg-type]',
            ],
            {"path": "src/calc.py", "line": 12},
        ),
        (
            "ruff_concise.txt",
            "ruff",
            [
                "ruff: src/calc.py:1:8: F401 `os` imported but unused",
                "ruff: tests/test_broken.py:1:8: F401 `nonexistent_module_xyz` imported but unused",
                "ruff: tests/test_calc.py:1:1: I001 Import block is un-sorted or un-formatted",
            ],
            {"path": "src/calc.py", "line": 1},
        ),
        (
            "gcc.txt",
            "gcc",
            [
                "gcc: main.c:2: fatal error: missing_header.h: No such file or directory",
                "gcc: util.c:5: error: \u2018undefined_var\u2019 undeclared (first use in this function)",
            ],
            {"path": "main.c", "line": 2},
        ),
        (
            "tsc.txt",
            "tsc",
            [
                "tsc: src/index.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.",
                "tsc: src/api/client.ts(3,24): error TS2307: Cannot find module './types' or its "
                "corresponding type declarations.",
            ],
            {"path": "src/index.ts", "line": 12},
        ),
        (
            "eslint.txt",
            "eslint",
            [
                "eslint: /home/ci/work/web/src/app.js:3:7 'unused' is assigned a value but never used "
                "(no-unused-vars)",
                "eslint: /home/ci/work/web/src/app.js:14:12 'fetchData' is not defined (no-undef)",
                "eslint: /home/ci/work/web/src/utils/format.js:1:10 Parsing error: Unexpected token {",
            ],
            {"path": "/home/ci/work/web/src/app.js", "line": 3},
        ),
        (
            "cargo.txt",
            "cargo",
            [
                "cargo: error[E0425]: cannot find value `z` in this scope at src/main.rs:8",
                "cargo: error[E0308]: mismatched types at src/main.rs:6",
            ],
            {"path": "src/main.rs", "line": 8},
        ),
        (
            "go_build.txt",
            "go",
            ["go: main.go:12:5: undefined: x", "go: calc.go:8:2: declared and not used: tmp"],
            {"path": "main.go", "line": 12},
        ),
        (
            "go_test_short.txt",
            "go",
            ["go: --- FAIL: TestAdd: Add(1, 2) = 4; want 3", "go: --- FAIL: TestSub: Sub(3, 1) = 1; want 2"],
            {"path": "calc_test.go", "line": 12},
        ),
        (
            "go_panic.txt",
            "go",
            ["go: panic: runtime error: index out of range [5] with length 3"],
            {"path": "/home/ci/go/src/example.com/calc/pick.go", "line": 9},
        ),
    ],
)
def test_detector_finds_each_failure_in_real_output(name, detector, summaries, first_location):
    failures = parse_failures(sample(name))
    assert [f.summary for f in failures] == summaries
    assert {f.detector for f in failures} == {detector}
    if first_location is not None:
        assert failures[0].locations[0] == first_location
    assert len({f.fingerprint for f in failures}) == len(failures)


def test_ruff_full_and_concise_formats_give_the_same_failures():
    full = parse_failures(sample("ruff_full.txt"))
    concise = parse_failures(sample("ruff_concise.txt"))
    assert [f.fingerprint for f in full] == [f.fingerprint for f in concise]
    assert "help: Remove unused import" in full[0].excerpt


def test_tsc_pretty_and_paren_formats_agree():
    assert [f.fingerprint for f in parse_failures(sample("tsc_pretty.txt"))] == [
        f.fingerprint for f in parse_failures(sample("tsc.txt"))
    ]


def test_go_verbose_test_output_attaches_messages_printed_before_fail_line():
    failures = parse_failures(sample("go_test.txt"))
    add = failures[0]
    assert add.summary == "go: --- FAIL: TestAdd: Add(1, 2) = 4; want 3"
    assert add.locations == [{"path": "calc_test.go", "line": 12}]
    assert any(f.summary.startswith("go: --- FAIL: TestParse/empty") for f in failures)


def test_pytest_failure_carries_its_detail_section_and_locations():
    div = parse_failures(sample("pytest_failures.txt"))[1]
    assert "E       ZeroDivisionError: division by zero" in div.excerpt
    assert div.locations == [{"path": "tests/test_calc.py", "line": 11}, {"path": "src/calc.py", "line": 9}]


def test_traceback_with_timestamp_prefix_in_mixed_log_is_one_block():
    failures = parse_failures(sample("ci_mixed.txt"))
    assert len(failures) == 1
    f = failures[0]
    assert f.summary == "python: KeyError: 'rows' (at /srv/app/src/jobs/handlers.py:41)"
    assert [loc["line"] for loc in f.locations] == [88, 41]
    assert "Step 4/7" not in f.excerpt.split("KeyError")[0]


def test_chained_traceback_is_one_failure_with_all_frames():
    (f,) = parse_failures(sample("python_traceback_chained.txt"))
    assert "FileNotFoundError" in f.excerpt and "RuntimeError: config missing" in f.excerpt
    assert [loc["line"] for loc in f.locations] == [7, 3, 10, 9]


def test_same_failure_printed_twice_is_one_failure():
    text = sample("gcc.txt")
    assert len(parse_failures(text + "\n" + text)) == len(parse_failures(text))


def test_fingerprint_ignores_line_numbers_addresses_timestamps_and_tmp_paths():
    tb = (
        "2024-05-14T09:12:05Z Traceback (most recent call last):\n"
        '2024-05-14T09:12:05Z   File "/tmp/pytest-of-ci/pytest-{n}/x/app.py", line {line}, in run\n'
        "2024-05-14T09:12:05Z     go()\n"
        "2024-05-14T09:12:05Z ValueError: bad object <Thing at {addr}>\n"
    )
    a = parse_failures(tb.format(n=1, line=10, addr="0x7f3a2c"))
    b = parse_failures(
        tb.format(n=7, line=99, addr="0x55e1ff").replace("2024-05-14T09:12:05Z", "2025-01-02T23:59:01Z")
    )
    c = parse_failures(tb.format(n=1, line=10, addr="0x7f3a2c").replace("ValueError", "TypeError"))
    assert len(a) == len(b) == len(c) == 1
    assert a[0].fingerprint == b[0].fingerprint
    assert a[0].fingerprint != c[0].fingerprint


def test_gcc_fingerprint_stable_across_line_moves_but_differs_by_message():
    base = "util.c:5:12: error: 'x' undeclared (first use in this function)\n"
    moved = base.replace(":5:12:", ":40:3:")
    other = base.replace("'x'", "'y'")
    fp = [parse_failures(t)[0].fingerprint for t in (base, moved, other)]
    assert fp[0] == fp[1] != fp[2]


def test_custom_pattern_is_a_custom_failure_and_noise_is_nothing():
    text = "starting\nall good\nDEPLOY ABORTED: quota exceeded\ndone\n"
    assert parse_failures(text) == []
    (f,) = parse_failures(text, extra_patterns=[r"DEPLOY ABORTED"])
    assert f.detector == "custom" and f.summary == "custom: DEPLOY ABORTED: quota exceeded"
    assert "all good" in f.excerpt  # context lines


def test_context_lines_bound_the_excerpt():
    noise = "".join(f"noise line {i}\n" for i in range(50))
    text = noise + "util.c:5:12: error: boom\n" + noise
    (f,) = parse_failures(text, context_lines=2)
    assert f.excerpt.splitlines() == ["noise line 48", "noise line 49", "util.c:5:12: error: boom",
                                      "noise line 0", "noise line 1"]


def test_failure_far_into_large_noisy_text_is_found_with_its_line_index():
    noise = "".join(f"[info] compiling module {i}\n" for i in range(100_000))
    text = noise + "./main.go:3:1: undefined: y\n" + noise
    ((f, line),) = scan_failures(text)
    assert f.summary == "go: main.go:3:1: undefined: y"
    assert line == 100_000


def test_incomplete_traceback_at_end_of_text_is_not_reported_yet():
    text = 'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
    assert parse_failures(text) == []
    assert len(parse_failures(text + "    f()\nOSError: disk full\n")) == 1


def test_ansi_colours_are_ignored():
    text = (
        "\x1b[1msrc/index.ts\x1b[0m:\x1b[93m12\x1b[0m:\x1b[93m5\x1b[0m - \x1b[91merror\x1b[0m TS2322: bad\n"
    )
    (f,) = parse_failures(text)
    assert f.detector == "tsc" and f.locations == [{"path": "src/index.ts", "line": 12}]


def test_parse_locations_covers_every_form_in_order_deduplicated():
    text = (
        '  File "src/a.py", line 3, in f\n'
        "src/b.py:4:2: E1 x\n"
        "tests/test_c.py:5: in test_c\n"
        "./main.go:6:3: undefined: z\n"
        "src/d.ts(7,5): error TS1: y\n"
        "src/b.py:4:9: again\n"
        "see http://example.com:8080/x and 127.0.0.1:9000\n"
    )
    assert parse_locations(text) == [
        {"path": "src/a.py", "line": 3},
        {"path": "src/b.py", "line": 4},
        {"path": "tests/test_c.py", "line": 5},
        {"path": "main.go", "line": 6},
        {"path": "src/d.ts", "line": 7},
    ]


@pytest.mark.parametrize(
    "noise",
    [
        b"DEBUG worker-5: heartbeat ok, queue depth 12\n",  # "error"'s bytes common, its pair "rr" absent
        b"rr RR FF AA __ >> :: .g pa xx\n" * 3,  # every rare byte and pair common: plain find
        b"\xff\xfe binary-ish \x00 junk\n",
    ],
)
def test_failures_found_whatever_search_the_noise_makes_the_prefilter_choose(noise):
    errors = [
        b"src/f1.c:3:5: error: 'v1' undeclared\n",
        b"./pkg2.go:4:3: undefined: sym2\n",
        b"src/c3.ts(5,7): error TS2322: Type 'T3' is not assignable.\n",
        b"ERROR tests/test_x.py - ImportError: boom\n",
        b"src/a.py:1:8: F401 `os` imported but unused\n",
    ]
    buf = noise * 20_000 + b"".join(e + noise * 5_000 for e in errors)
    found = scan_bytes(buf)
    assert len(found) == len(errors)
    for (failure, off), line in zip(found, errors, strict=True):
        assert buf.startswith(line, off)  # the offset is where the completing line starts
        assert failure.summary.split(": ", 1)[1][:6] in line.decode()


def test_scan_bytes_since_skips_regions_already_scanned_but_keeps_later_ones():
    old = b"src/old.c:1:1: error: old\n" + b"noise\n" * 500
    new = b"src/new.c:2:2: error: new\n"
    found = scan_bytes(old + new, since=len(old))
    assert [f.summary for f, _ in found] == ["gcc: src/new.c:2: error: new"]
