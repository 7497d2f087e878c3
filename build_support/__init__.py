"""Build-time helpers for setup.py (not installed)."""
