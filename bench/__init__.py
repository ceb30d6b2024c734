"""Benchmarks: each `bench_*.py` prints one JSON document; `python -m bench` runs them all."""
