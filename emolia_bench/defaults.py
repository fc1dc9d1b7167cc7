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
