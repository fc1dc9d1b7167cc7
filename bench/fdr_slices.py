"""False discoveries of the per-slice "differs from chance" claims when no slice differs.

    uv run bench/fdr_slices.py [--labels A/benchmark_labels.csv ...] [--reps 1000]

For each subset's shape (as bench/coverage_cv.py: by default bench/synth.py's 1× exports after
analysis.py; ``--labels`` takes any analysis run's ``<subset>/benchmark_labels.csv``), each
repetition draws a new benchmark from the shape (clips with replacement) and gives every row a
uniform random score thresholded at 0.5 — a scorer with balanced accuracy 0.5 in every slice
(a global null). benchmark.py's per-category "differs from chance" p-values are computed
(Fisher's exact test per slice; slices below 20 rows of a class withheld) and their
Benjamini–Hochberg q-values. Prints, per shape, the
share of repetitions with at least one slice claimed at q ≤ 0.05 (under a global null this is
the false discovery rate: target ≤ 0.05), the mean number of such claims, and as the reference
measured in the same run the same for unadjusted p ≤ 0.05.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from coverage_cv import shape, synthetic_labels  # noqa: E402

from emolia_bench.metrics import bh_q_values, metrics_of  # noqa: E402

MIN_CLASS_ROWS = 20


def one_rep(args) -> tuple[int, int, int]:
    """(slices tested, claims at q <= 0.05, claims at p <= 0.05) of one repetition."""
    clip, category, truth, rep = args
    rng = np.random.default_rng(5000 + rep)
    codes, names = pd.factorize(clip)
    rows_of = pd.Series(np.arange(len(clip))).groupby(codes).apply(list).to_list()
    drawn = rng.integers(0, len(names), len(names))
    rows = np.concatenate([rows_of[c] for c in drawn])
    clip = np.repeat(np.arange(len(drawn)), [len(rows_of[c]) for c in drawn])
    category, truth = category[rows], truth[rows]
    pred = (rng.random(len(truth)) >= 0.5).astype(np.int64)
    cat = pd.factorize(category, sort=True)[0]
    p = []
    for g in range(cat.max() + 1):
        sel = cat == g
        row = metrics_of(truth[sel], pred[sel], pred[sel].astype(float), (None, None), MIN_CLASS_ROWS)
        p.append(row.balanced_accuracy_p_chance)
    q = bh_q_values(p)
    tested = [i for i, v in enumerate(p) if v is not None]
    return len(tested), sum(q[i] <= 0.05 for i in tested), sum(p[i] <= 0.05 for i in tested)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", type=Path, nargs="+", help="benchmark_labels.csv of an analysis run (default: synthetic)")
    ap.add_argument("--reps", type=int, default=1000, help="repetitions per shape (default 1000)")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = args.labels or synthetic_labels(Path(tmp))
        shapes = []
        for f in files:
            name, clip, _, truth = shape(f)
            df = pd.read_csv(f, dtype=str, keep_default_na=False)
            df = df[df["majority_present"].isin(["0", "1"])]
            category = df["queried_emotion" if "queried_emotion" in df else "dimension"].to_numpy()
            shapes.append((name, clip, category, truth))
    print(f"{args.reps} repetitions; every slice at balanced accuracy 0.5")
    print("| shape | slices tested (mean) | reps with a claim at q ≤ 0.05 | claims per rep | reps with a claim at p ≤ 0.05 (unadjusted) | claims per rep |")
    print("|---|---|---|---|---|---|")
    for name, clip, category, truth in shapes:
        with ProcessPoolExecutor(args.workers) as pool:
            res = np.array(list(pool.map(one_rep, [(clip, category, truth, r) for r in range(args.reps)],
                                         chunksize=4)))
        any_q, any_p = (res[:, 1] > 0).mean(), (res[:, 2] > 0).mean()
        se = lambda x: np.sqrt(x * (1 - x) / args.reps)  # noqa: E731
        print(f"| {name} | {res[:, 0].mean():.1f} | {any_q:.3f} ± {se(any_q):.3f} | {res[:, 1].mean():.3f} | "
              f"{any_p:.3f} ± {se(any_p):.3f} | {res[:, 2].mean():.3f} |", flush=True)


if __name__ == "__main__":
    main()
