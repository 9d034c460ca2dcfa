"""A trivial Flower app (benchmarks/bench_federation.py)."""
