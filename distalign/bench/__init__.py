"""Controlled benchmarks (``distalign bench ...``)."""
