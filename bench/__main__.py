"""`python -m bench [--full] [--only NAME ...]`: run every benchmark and print one JSON document."""

from bench.run_all import main

if __name__ == "__main__":
    raise SystemExit(main())
