"""Prometheus metrics: what autod counts and times, served on loopback and printed by `autod metrics`.

`registry.Metrics` holds every metric on a registry of its own (never the library's global one);
`observe` feeds it from outside the cycle (finished cycles, check runs, the planner and the modes at
their seams); `sampler` reads the gauges (queue, retries, quarantine, memory) every `metrics.sample_s`;
`server` serves the exposition with prometheus_client's own HTTP server on a loopback address.
"""

from __future__ import annotations
