"""Coverage of the soft-label and noise-ceiling intervals (emolia_bench/soft_labels.py, ceiling.py).

    uv run bench/coverage_soft.py [--reps 200] [--clips 500] [--draws 200]

A population shaped like the real emo export: each clip carries 1-3 queried emotions (items),
an item's hidden class is present with probability 0.60, three raters with the real export's
Dawid-Skene channels (sensitivity / specificity 0.63 / 0.88, 0.78 / 0.67, 0.78 / 0.37) vote on
every item, and the model's similarity is a logit: 1.2·(class - 0.6) + a clip effect N(0, 0.5²)
+ noise N(0, 1) (rows of one clip are correlated, as real clips are). The model's probability is
σ(similarity) (``--similarity logit``: no fitted map, so the population value is well defined).

Population values by Monte Carlo on 400,000 items: the Brier score and Jensen-Shannon divergence
against the vote fraction, the pooled soft AUROC, and the noise ceiling (with the true channels:
P(present) · max(s̄, 1 − s̄) + P(absent) · max(c̄, 1 − c̄)). Each repetition draws a new benchmark,
runs benchmark.py's soft-label block and noise ceiling (the ceiling from a Dawid-Skene fit of that
repetition's votes, as analysis.py does, re-fitted in every resample) and counts how often each
95 % clip-bootstrap interval covers the population value. Calibration error is left out: its estimator is biased upward at any
sample size (empty and sparse bins), so an interval around it is not expected to cover.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emolia_bench.evaluation import noise_ceiling  # noqa: E402
from emolia_bench.rater_models import fit_rater_models  # noqa: E402
from emolia_bench.resampling import Bootstrap  # noqa: E402
from emolia_bench.soft_labels import jensen_shannon, soft_label_block  # noqa: E402
from emolia_bench.subsets import SUBSETS  # noqa: E402
from emolia_bench.thresholds import clip_folds  # noqa: E402

CHANNELS = np.array([(0.63, 0.88), (0.78, 0.67), (0.78, 0.37)])
PREVALENCE = 0.60
EMO = SUBSETS["emolia-emo"]
FIGURES = ("brier_vote_fraction", "jensen_shannon_vote_fraction", "soft_auroc", "ceiling")


def draw(rng, n_clips: int):
    """(scored rows, votes, truth) of one benchmark."""
    per_clip = rng.integers(1, 4, n_clips)
    clip = np.repeat(np.arange(n_clips), per_clip)
    n = len(clip)
    truth = (rng.random(n) < PREVALENCE).astype(int)
    sims = 1.2 * (truth - PREVALENCE) + rng.normal(0, 0.5, n_clips)[clip] + rng.normal(0, 1, n)
    votes = np.column_stack([(rng.random(n) < np.where(truth == 1, s, 1 - c)).astype(int) for s, c in CHANNELS])
    emotions = np.array(["Awe", "Joy", "Anger", "Fear", "Sadness", "Contempt", "Pride"])
    scored = pd.DataFrame({"file_name": [f"c{k:05d}.mp3" for k in clip], "queried_emotion": emotions[np.arange(n) % 7],
                           "task_type": np.where(rng.random(n) < 0.5, "affirmative", "contrastive_1"),
                           "similarity": sims, "clip": [f"c{k:05d}" for k in clip],
                           "majority_present": (votes.sum(axis=1) >= 2).astype(int)})
    scored["pred_present"] = (sims >= 0).astype(int)
    long = pd.DataFrame({"item": np.repeat(np.arange(n), 3), "rater": np.tile(np.arange(3), n), "binary": votes.ravel()})
    long["value"] = long["binary"]
    keyed = pd.concat([scored.loc[long["item"], list(EMO.item_key)].reset_index(drop=True),
                       long[["rater", "binary", "value"]]], axis=1)
    keyed["rater"] = keyed["rater"].map(lambda r: f"user_{r}")
    return scored, keyed, long


def population(rng) -> dict:
    n = 400_000
    truth = (rng.random(n) < PREVALENCE).astype(int)
    sims = 1.2 * (truth - PREVALENCE) + rng.normal(0, 0.5, n) + rng.normal(0, 1, n)
    q = np.mean([(rng.random(n) < np.where(truth == 1, s, 1 - c)) for s, c in CHANNELS], axis=0)
    p = 1 / (1 + np.exp(-sims))
    order = np.argsort(sims)  # soft AUROC: positives weighted q, negatives 1 - q (no ties in continuous scores)
    neg_below = np.cumsum((1 - q)[order]) - (1 - q)[order]
    auroc = float(q[order] @ neg_below + 0.5 * q @ (1 - q)) / (q.sum() * (1 - q).sum())
    s_bar, c_bar = CHANNELS.mean(axis=0)
    return {"brier_vote_fraction": float(np.mean((p - q) ** 2)), "jensen_shannon_vote_fraction": float(np.mean(jensen_shannon(p, q))),
            "soft_auroc": auroc, "ceiling": PREVALENCE * max(s_bar, 1 - s_bar) + (1 - PREVALENCE) * max(c_bar, 1 - c_bar)}


def one(args) -> dict:
    rep, n_clips, draws, truth_values = args
    rng = np.random.default_rng(1000 + rep)
    scored, keyed, long = draw(rng, n_clips)
    bootstrap = Bootstrap(draws=draws, seed=rep)
    folds = clip_folds(scored["clip"].to_numpy(), 5, seed=rep)
    block, _ = soft_label_block(scored, keyed, EMO, logit=True, folds=folds, bootstrap=bootstrap)
    n = len(scored)
    fitted, per_item, per_rater = fit_rater_models(long, ["user_0", "user_1", "user_2"], scored["majority_present"].to_numpy(),
                                                   np.zeros(n, bool), bootstrap=Bootstrap(draws=0, seed=rep))
    fit = (fitted["noise_ceiling"]["mean_sensitivity"], fitted["noise_ceiling"]["mean_specificity"],
           fitted["dawid_skene"]["iterations"])
    c = noise_ceiling(scored, keyed, EMO, fit, bootstrap=bootstrap)
    intervals = {k: block["model"][k]["ci95"] for k in FIGURES[:3]} | {"ceiling": c["ceiling"]["ci95"]}
    return {k: bool(iv is not None and iv[0] <= truth_values[k] <= iv[1]) for k, iv in intervals.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--clips", type=int, default=500)
    ap.add_argument("--draws", type=int, default=200)
    args = ap.parse_args()
    truth = population(np.random.default_rng(7))
    with ProcessPoolExecutor() as pool:
        hits = list(pool.map(one, [(r, args.clips, args.draws, truth) for r in range(args.reps)]))
    print(f"{args.reps} benchmarks of {args.clips} clips (about {2 * args.clips} items), {args.draws} clip resamples each")
    print("| figure | population value | 95 % interval covers it | ± (binomial s.e.) |")
    print("|---|---|---|---|")
    for k in FIGURES:
        rate = np.mean([h[k] for h in hits])
        print(f"| {k} | {truth[k]:.4f} | {rate:.3f} | {np.sqrt(rate * (1 - rate) / args.reps):.3f} |")


if __name__ == "__main__":
    main()
