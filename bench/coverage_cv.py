"""Coverage of the cross-validated balanced accuracy's interval for a scorer that knows nothing.

    uv run bench/coverage_cv.py [--labels A/benchmark_labels.csv ...] [--reps 400] [--draws 200]

For each subset's shape (its items, clips, prompts and majority labels: by default those of
bench/synth.py's 1× exports after analysis.py; ``--labels`` takes any analysis run's
``<subset>/benchmark_labels.csv``, e.g. of the real exports), each repetition draws a new
benchmark from that shape as from a population — its clips drawn with replacement, each draw a
clip of its own with all its rows — and gives every row a fresh uniform random score (a scorer
whose true balanced accuracy is 0.5 at any threshold), then computes benchmark.py's cross-validated balanced accuracy (5 clip folds, global and per
prompt) with its 95 % clip-bootstrap interval. Prints the share of repetitions whose interval
covers 0.5 (target ≥ 0.93) with its Monte-Carlo standard error, for the interval benchmark.py
reports (thresholds re-chosen in every resample) and, as the reference measured in the same
run, for the interval that holds the chosen thresholds fixed (what it reported before).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from emolia_bench.metrics import slice_intervals  # noqa: E402
from emolia_bench.resampling import Bootstrap, percentile_interval  # noqa: E402
from emolia_bench.subsets import SUBSETS  # noqa: E402
from emolia_bench.thresholds import clip_folds, cv_balanced_accuracy  # noqa: E402


def shape(labels: Path) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(subset name, clip, prompt, majority) of the rows a benchmark run scores."""
    subset = SUBSETS[labels.parent.name]
    df = pd.read_csv(labels, dtype=str, keep_default_na=False)
    df = df[df["majority_present"].isin(["0", "1"])]
    clip = subset.sham_stem(df).to_numpy()  # the clip's name, as the sham scorer reads it
    return subset.name, clip, subset.template_value(df, None).to_numpy(), df["majority_present"].astype(int).to_numpy()


def one_rep(args) -> list[tuple[bool, bool]]:
    """[(re-run interval covers 0.5, fixed-threshold interval covers 0.5) for global, per prompt]."""
    clip, prompt, truth, rep, draws = args
    rng = np.random.default_rng(1000 + rep)
    codes, names = pd.factorize(clip)
    rows_of = pd.Series(np.arange(len(clip))).groupby(codes).apply(list).to_list()
    drawn = rng.integers(0, len(names), len(names))  # a new sample of clips from the shape
    rows = np.concatenate([rows_of[c] for c in drawn])
    clip = np.repeat([f"c{i}" for i in range(len(drawn))], [len(rows_of[c]) for c in drawn])
    prompt, truth = prompt[rows], truth[rows]
    scores = rng.random(len(truth))
    folds = clip_folds(clip, 5, seed=rep)
    boot = Bootstrap(draws=draws, seed=rep)
    out = []
    for groups in (None, prompt):
        _, draws, applied = cv_balanced_accuracy(truth, scores, clip, folds, 0.0, groups, bootstrap=boot)
        iv = percentile_interval(draws)
        fixed = slice_intervals(truth, (scores >= applied).astype(np.int64), clip, [np.zeros(len(truth), np.int64)],
                                bootstrap=boot)[0][0][0]
        out.append((iv.low <= 0.5 <= iv.high, fixed.low <= 0.5 <= fixed.high))
    return out


def synthetic_labels(tmp: Path) -> list[Path]:
    from synth import write_exports

    write_exports(tmp / "exports", 1)
    subprocess.run([sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(tmp / "exports/annotations"),
                    "--output-root", str(tmp / "an"), "--no-figures"], check=True, stdout=subprocess.DEVNULL)
    return sorted((tmp / "an").glob("*/benchmark_labels.csv"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", type=Path, nargs="+", help="benchmark_labels.csv of an analysis run (default: synthetic)")
    ap.add_argument("--reps", type=int, default=400, help="repetitions per shape (default 400)")
    ap.add_argument("--draws", type=int, default=200, help="bootstrap resamples per interval (default 200)")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = args.labels or synthetic_labels(Path(tmp))
        shapes = [shape(f) for f in files]
    print(f"{args.reps} repetitions, {args.draws} clip resamples per interval; a uniform random score per row")
    print("| shape | rows | clips | prompts | prevalence per prompt | CV BA interval covers 0.5: global | per prompt"
          " | thresholds held fixed: global | per prompt |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, clip, prompt, truth in shapes:
        with ProcessPoolExecutor(args.workers) as pool:
            res = np.array(list(pool.map(one_rep, [(clip, prompt, truth, r, args.draws) for r in range(args.reps)],
                                         chunksize=4)))  # reps × (global, per prompt) × (re-run, fixed)
        cover = res.mean(axis=0)
        se = np.sqrt(cover * (1 - cover) / args.reps)
        prev = pd.Series(truth).groupby(prompt).mean()
        cells = [f"{cover[g, m]:.3f} ± {se[g, m]:.3f}" for m in (0, 1) for g in (0, 1)]
        print(f"| {name} | {len(truth):,} | {len(np.unique(clip)):,} | {len(prev)} | {prev.min():.2f}–{prev.max():.2f} | "
              + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
