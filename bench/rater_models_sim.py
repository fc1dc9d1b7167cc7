"""Does Dawid–Skene find the truth the majority misses? A simulation with known raters.

    uv run bench/rater_models_sim.py [--items 8000] [--reps 20]

Three raters whose channels are the real emo export's Dawid–Skene estimates (sensitivity /
specificity 0.63 / 0.88, 0.78 / 0.67, 0.78 / 0.37: one cautious, one balanced, one who says
"present" to most), 8,000 items with a hidden truth present at 0.60 (the DS estimate), every
rater rating every item. Per repetition, emolia_bench.rater_models fits the models; printed: how
often the majority and each model's label equal the simulated truth, and the Dawid–Skene
sensitivity and specificity recovered against the simulated ones (mean and largest error), and
the noise ceiling the fit claims against the accuracy seen on one simulated new vote per item
(from a rater drawn at random) of the predictor it describes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emolia_bench.rater_models import MODELS, fit_rater_models  # noqa: E402
from emolia_bench.resampling import Bootstrap  # noqa: E402

CONFUSIONS = [(0.63, 0.88), (0.78, 0.67), (0.78, 0.37)]
PREVALENCE = 0.60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=8000)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    right = {k: [] for k in ("majority", *MODELS)}
    errors, ceilings = [], []
    for rep in range(args.reps):
        rng = np.random.default_rng(rep)
        truth = (rng.random(args.items) < PREVALENCE).astype(int)
        rows = []
        for j, (sens, spec) in enumerate(CONFUSIONS):
            votes = (rng.random(args.items) < np.where(truth == 1, sens, 1 - spec)).astype(int)
            rows.append(pd.DataFrame({"item": np.arange(args.items), "rater": j, "binary": votes, "value": votes}))
        votes = pd.concat(rows, ignore_index=True)
        majority = (votes.groupby("item")["binary"].sum().to_numpy() >= 2).astype(int)
        block, per_item, per_rater = fit_rater_models(votes, ["a", "b", "c"], majority, np.zeros(args.items, bool),
                                                  bootstrap=Bootstrap(draws=0, seed=rep))
        right["majority"].append((majority == truth).mean())
        # the noise ceiling against what it claims: a new vote per item from a rater drawn at random
        # (equal shares: everyone rated everything), predicted by the truth-knowing Bayes predictor
        rater = rng.integers(0, len(CONFUSIONS), args.items)
        sens, spec = np.array(CONFUSIONS).T
        new_vote = (rng.random(args.items) < np.where(truth == 1, sens[rater], 1 - spec[rater])).astype(int)
        s_bar, c_bar = sens.mean(), spec.mean()
        oracle = np.where(truth == 1, int(s_bar >= 0.5), int(c_bar < 0.5))  # the likelier vote given the class
        v = per_item["dawid_skene_present_probability"].to_numpy()
        v = v * block["noise_ceiling"]["mean_sensitivity"] + (1 - v) * (1 - block["noise_ceiling"]["mean_specificity"])
        ceilings.append([block["noise_ceiling"]["ceiling"]["value"], (oracle == new_vote).mean(),
                         block["noise_ceiling"]["votes_own_predictor"]["value"], ((v >= 0.5) == new_vote).mean()])
        for name in MODELS:
            right[name].append((per_item[f"{name}_label"].to_numpy() == truth).mean())
        errors.append([per_rater.loc[j, "ds_sensitivity"] - s for j, (s, _) in enumerate(CONFUSIONS)]
                      + [per_rater.loc[j, "ds_specificity"] - p for j, (_, p) in enumerate(CONFUSIONS)])
    print(f"{args.reps} repetitions of {args.items} items, 3 raters, truth present at {PREVALENCE}")
    print("| label | equals the simulated truth (mean over repetitions) |")
    print("|---|---|")
    for name, values in right.items():
        print(f"| {name} | {np.mean(values):.4f} (min {np.min(values):.4f}) |")
    e = np.array(errors)
    print("\n| rater | simulated sensitivity / specificity | DS recovered (mean) | largest error |")
    print("|---|---|---|---|")
    for j, (sens, spec) in enumerate(CONFUSIONS):
        print(f"| {j} | {sens:.2f} / {spec:.2f} | {sens + e[:, j].mean():.3f} / {spec + e[:, 3 + j].mean():.3f} | "
              f"{np.abs(e[:, [j, 3 + j]]).max():.3f} |")
    c = np.array(ceilings)
    print("\n| noise ceiling | claimed (DS fit, mean) | seen on a simulated new vote (mean) | largest |claimed - seen| |")
    print("|---|---|---|---|")
    for k, name in ((0, "ceiling: the truth-knowing predictor"), (2, "the votes' own predictor")):
        print(f"| {name} | {c[:, k].mean():.4f} | {c[:, k + 1].mean():.4f} | {np.abs(c[:, k] - c[:, k + 1]).max():.4f} |")


if __name__ == "__main__":
    main()
