"""Benchmarks and operational checks behind `upstream bench ...`."""
