"""Do llama.cpp's own grammar parser and autod's leg-one grammars agree? (autod.planner.linechoice)

Builds the grammar leg one would send for every 120-line window of every .py file under the given
directories (default: this interpreter's site-packages, real libraries none of us wrote) and has
llama.cpp parse each (llama-cpp-python's bindings, the model's vocabulary alone loaded). Prints JSON:
how many grammars, how many llama.cpp refused, and the first refused.

    /work/llm/venv/bin/python bench/linechoice_parse.py --model M.gguf [DIR ...]

Not run in CI (it needs llama-cpp-python and a GGUF model); the unit tests read the same grammars with
a reader that follows llama.cpp's parser (tests/unit/test_linechoice.py).
"""

from __future__ import annotations

import argparse
import json
import site
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autod.planner import linechoice  # noqa: E402

WINDOW = 120


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--model", required=True, type=Path, help="a GGUF model (its vocabulary is read)")
    args = ap.parse_args()
    import llama_cpp  # the bench venv's, not autod's

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(args.model).encode(), params)
    vocab = llama_cpp.llama_model_get_vocab(model)

    def parses(grammar: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    assert parses('root ::= "a" | "b"') and not parses('root ::= "a')  # the parser answers both ways
    dirs = args.dirs or [Path(p) for p in site.getsitepackages()]
    started, grammars, refused, first = time.monotonic(), 0, 0, None
    files = sorted(p for d in dirs for p in d.rglob("*.py"))
    for path in files:
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
        for at in range(0, len(lines), WINDOW):
            grammar = linechoice.gbnf(lines[at: at + WINDOW])
            if grammar is None:
                continue
            grammars += 1
            if not parses(grammar):
                refused += 1
                first = first or f"{path}:{at + 1}"
    print(json.dumps({"files": len(files), "grammars": grammars, "refused": refused, "first_refused": first,
                      "seconds": round(time.monotonic() - started, 1)}))
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
