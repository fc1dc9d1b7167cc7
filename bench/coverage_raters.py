"""Coverage of the "raters as sampled" intervals when each benchmark has new raters.

    uv run bench/coverage_raters.py [--reps 400] [--items 2000] [--raters 3] [--draws 200]

A population of raters: rater j is right about an item's hidden truth with probability p_j,
p_j uniform on [0.55, 0.90] (so raters differ, as the real emo raters do: they say "present" at
rates 0.41–0.72); the model is right with probability 0.70, independently. Each repetition draws
``--raters`` new raters and ``--items`` new items (truth present with probability 0.5, every rater
rates every item, one item per clip) and computes benchmark.py's ``vs_humans.raters_as_sampled``.
The population values, for raters drawn anew: A* = q·E p + (1 − q)(1 − E p) (the model against a
random rater), H* = E p² + (1 − E p)² (two random raters: their errors independent), Δ* = A* − H*;
and the leave-one-out Δ balanced accuracy (model − human on the same targets), whose population
value is taken by Monte Carlo (400 benchmarks of 20,000 items, new raters each).
Prints how often each figure's "these raters" interval (clips resampled) and "raters as sampled"
interval (plus the rater jackknife) cover the population value: target ≥ 0.93 for the latter.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emolia_bench.resampling import Bootstrap  # noqa: E402
from emolia_bench.summary import Support  # noqa: E402
from emolia_bench.vs_humans import loo_rows, raters_as_sampled  # noqa: E402

P_LOW, P_HIGH, MODEL = 0.55, 0.90, 0.70
NAMES = ("model_accuracy", "human_pairwise_accuracy", "model_minus_human", "loo_model_minus_human")


def population() -> dict:
    ep = (P_LOW + P_HIGH) / 2
    a = MODEL * ep + (1 - MODEL) * (1 - ep)
    h = ep**2 + (1 - ep) ** 2
    return {"model_accuracy": a, "human_pairwise_accuracy": h, "model_minus_human": a - h}


def benchmark(rng, n_items: int, n_raters: int):
    """One benchmark: new raters, new items; (votes frame, the model's decisions)."""
    truth = rng.integers(0, 2, n_items)
    p = rng.uniform(P_LOW, P_HIGH, n_raters)
    right = rng.random((n_raters, n_items)) < p[:, None]
    votes = np.where(right, truth, 1 - truth)
    frame = pd.DataFrame({"item": np.tile(np.arange(n_items), n_raters), "rater": np.repeat(np.arange(n_raters), n_items),
                          "binary": votes.ravel()})
    return frame, np.where(rng.random(n_items) < MODEL, truth, 1 - truth)


def loo_population(n_raters: int, panels: int = 400, n_items: int = 20_000) -> float:
    """The leave-one-out Δ balanced accuracy for raters drawn anew, by Monte Carlo: its mean over
    ``panels`` benchmarks of ``n_items`` items (the clip noise averages out; a seed of its own)."""
    rng = np.random.default_rng(10**6)
    values = []
    for _ in range(panels):
        frame, decision = benchmark(rng, n_items, n_raters)
        values.append(loo_rows(frame, {"model": decision}, np.arange(n_items).astype(str),
                               bootstrap=Bootstrap(draws=1, seed=0), support=Support(30))["model"]
                      ["balanced_accuracy_minus_human"])
    return float(np.mean(values))


def one_rep(args) -> list[tuple[bool, bool]]:
    rep, n_items, n_raters, draws, loo_value = args
    rng = np.random.default_rng(rep)
    frame, decision = benchmark(rng, n_items, n_raters)
    clips = np.arange(n_items).astype(str)
    got = raters_as_sampled(frame, decision, clips, bootstrap=Bootstrap(draws=draws, seed=rep))
    truth_values = population()
    out = []
    for name in NAMES[:3]:
        lo1, hi1 = got[name]["these_raters_ci95"]
        lo2, hi2 = got[name]["raters_as_sampled_ci95"]
        v = truth_values[name]
        out.append((lo1 <= v <= hi1, lo2 <= v <= hi2))
    loo = loo_rows(frame, {"model": decision}, clips, bootstrap=Bootstrap(draws=draws, seed=rep), support=Support(30))["model"]
    (lo1, hi1), (lo2, hi2) = loo["balanced_accuracy_minus_human_ci95"], loo["balanced_accuracy_minus_human_raters_as_sampled_ci95"]
    out.append((lo1 <= loo_value <= hi1, lo2 <= loo_value <= hi2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--raters", type=int, default=3)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    loo_value = loo_population(args.raters)
    with ProcessPoolExecutor(args.workers) as pool:
        res = np.array(list(pool.map(one_rep, [(r, args.items, args.raters, args.draws, loo_value) for r in range(args.reps)],
                                     chunksize=4)))  # reps × figures × (these, sampled)
    cover = res.mean(axis=0)
    se = np.sqrt(cover * (1 - cover) / args.reps)
    print(f"{args.reps} repetitions, {args.raters} new raters and {args.items} items each, {args.draws} clip resamples")
    print("| figure | population value | these raters | raters as sampled |")
    print("|---|---|---|---|")
    values = {**population(), "loo_model_minus_human": loo_value}
    for k, name in enumerate(NAMES):
        print(f"| {name} | {values[name]:.4f} | {cover[k, 0]:.3f} ± {se[k, 0]:.3f} | {cover[k, 1]:.3f} ± {se[k, 1]:.3f} |")


if __name__ == "__main__":
    main()
