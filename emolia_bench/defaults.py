"""Default seeds and draw counts, importable without numpy or pandas (for fast --help)."""

BOOTSTRAP_SEED = 20260401
BOOTSTRAP_DRAWS = 1000
