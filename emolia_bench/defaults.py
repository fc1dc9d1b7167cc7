"""Subset names, default seeds and draw counts, importable without numpy or pandas (for fast --help)."""

# The subsets' names, for the scripts' --help (emolia_bench.subsets describes each one and
# checks that it describes exactly these).
SUBSET_NAMES = ("emolia-emo", "emolia-dim")

BOOTSTRAP_SEED = 20260401
BOOTSTRAP_DRAWS = 1000

# An agreement figure resting on fewer items is written with "reliable": false (analysis --min-items).
MIN_ITEMS = 30

# A benchmark slice whose minority class has fewer rows gets no balanced-accuracy interval
# (benchmark.py --min-class-rows).
MIN_CLASS_ROWS = 20

# The endpoint client's defaults (benchmark.py --timeout, --workers, --max-retries,
# --give-up-after); the README's table is checked against these.
ENDPOINT_TIMEOUT = 60.0  # seconds for a whole request: connect, send, the full answer
ENDPOINT_WORKERS = 64  # requests in flight at most
# Retries per request: at a 50 % fault rate a row fails all 17 attempts with probability
# 0.5**17 ≈ 7.6e-6 (0.06 rows expected among 8,000); a dead endpoint is caught by
# ENDPOINT_GIVE_UP_AFTER, not by this count.
ENDPOINT_MAX_RETRIES = 16
ENDPOINT_GIVE_UP_AFTER = 120.0  # seconds without one successful answer before the run gives up

# benchmark.py --alt-epsilon: the alternative annotator test's margin (emolia_bench/alt_test.py
# says why 0.1: crowd-worker-like raters who agree little)
ALT_EPSILON = 0.1
