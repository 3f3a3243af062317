"""Benchmarks (run as scripts from the repository root; ``bench.system`` is the system benchmark's package)."""
