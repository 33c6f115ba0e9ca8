"""Benchmarks: each prints its figures; `pdm run bench` runs them all."""
