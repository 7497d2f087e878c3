"""Benchmarks: side-by-side measurements of this library and its peers."""
