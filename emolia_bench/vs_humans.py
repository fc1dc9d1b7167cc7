"""The model as one more rater, scored on the humans' own targets (``summary.json["vs_humans"]``).

The benchmark's headline scores the model against the majority of *all* raters of an item; the
human ceiling scores each rater against the *other* raters. Those targets differ, so the two
numbers cannot be compared. Here the model (and, as references, the sampling prior and chance)
is scored exactly as a human is:

* **pairwise** — for every human rater, the model's decisions against that rater's votes on the
  items the rater rated (and the model scored): accuracy, balanced accuracy (undefined unless
  the rater used both answers) and Cohen's κ (undefined when chance agreement is 1); each
  averaged over raters with equal weight, as the human pairwise figure averages over rater
  pairs. The human row is that figure recomputed on the same items: every pair of raters, both
  directions for balanced accuracy (as in the analysis).
* **leave-one-out on identical comparisons** — every (item, held-out rater) where the human
  leave-one-out target is defined (the item has ≥ 3 votes and the other votes are not tied):
  the target is the majority of the other votes; the human's answer is the held-out vote, the
  model's its decision on the item. Accuracy and balanced accuracy of both on exactly that set,
  and model − human with a 95 % paired bootstrap interval resampling clips (every comparison of
  a clip's items moves with it; the same resamples score both).

Chance is a fair coin: accuracy and balanced accuracy 0.5, κ 0, in expectation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .agreement import (
    co_rated_pairs,
    kappas_from_tables,
    loo_comparisons,
    pair_tables,
    pairwise_accuracy,
)
from .metrics import balanced_accuracy_from_sums, binary_metrics, confusion_counts
from .ranking import spearman_by_group, spearman_with_interval
from .resampling import Bootstrap, percentile_interval
from .summary import Support


def _kappa(truth: np.ndarray, pred: np.ndarray) -> float | None:
    t = np.bincount(truth * 2 + pred, minlength=4).reshape(2, 2).astype(np.float64)
    k = kappas_from_tables(t)
    return float(k) if np.isfinite(k) else None


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def pairwise_rows(votes: pd.DataFrame, decisions: dict[str, np.ndarray], rater_names: list[str]) -> dict:
    """Pairwise agreement of each decision-maker with every human rater, and of the humans with
    each other, on the same votes. ``votes``: ``item, rater, binary`` (integer codes), only items
    the model scored; ``decisions``: name -> 0/1 decision per item code."""
    out = {}
    item, rater, vote = (votes[c].to_numpy(np.int64) for c in ("item", "rater", "binary"))
    for name, decision in decisions.items():
        pred = decision[item]
        per = []
        for r in np.unique(rater):
            mine = rater == r
            m = binary_metrics(vote[mine], pred[mine])
            per.append({"rater": rater_names[r], "n_items": int(mine.sum()), "accuracy": m["accuracy"], "balanced_accuracy": m["balanced_accuracy"],
                        "kappa": _kappa(vote[mine], pred[mine])})
        out[name] = {"accuracy": _mean(p["accuracy"] for p in per),
                     "balanced_accuracy": _mean(p["balanced_accuracy"] for p in per),
                     "kappa": _mean(p["kappa"] for p in per), "n_raters": len(per),
                     "n_comparisons": int(len(vote)), "per_rater": per}
    pairs = co_rated_pairs(votes)
    acc, bal = pairwise_accuracy(pairs)
    _, _, tables = pair_tables(pairs, "binary", 2)
    kappas = [float(k) for k in kappas_from_tables(tables) if np.isfinite(k)] if len(tables) else []
    out["human"] = {"accuracy": acc, "balanced_accuracy": bal, "kappa": float(np.mean(kappas)) if kappas else None,
                    "n_raters": int(len(np.unique(rater))), "n_comparisons": int(len(pairs)), "per_rater": []}
    return out


def loo_rows(votes: pd.DataFrame, decisions: dict[str, np.ndarray], clip_of_item: np.ndarray, *,
             bootstrap: Bootstrap, support: Support) -> dict:
    """Leave-one-out on identical comparisons (module docstring): the human row and one row per
    decision-maker, each with its difference from the human and that difference's interval."""
    comp = loo_comparisons(votes)
    truth, human = comp["truth"].to_numpy(np.int64), comp["pred"].to_numpy(np.int64)
    item = comp["item"].to_numpy(np.int64)
    h = binary_metrics(truth, human)
    out = {"n_comparisons": int(len(comp)), "n_items": int(len(np.unique(item))),
           "reliable": support.reliable(len(np.unique(item))),
           "human": {"accuracy": h["accuracy"], "balanced_accuracy": h["balanced_accuracy"]}}
    clip = pd.factorize(clip_of_item[item], sort=True)[0] if len(item) else np.empty(0, np.int64)
    for name, decision in decisions.items():
        pred = decision[item]
        m = binary_metrics(truth, pred)
        row = {"accuracy": m["accuracy"], "balanced_accuracy": m["balanced_accuracy"]}
        for key in ("accuracy", "balanced_accuracy"):
            row[f"{key}_minus_human"] = (None if m[key] is None or h[key] is None else m[key] - h[key])
        row["balanced_accuracy_minus_human_ci95"] = row["accuracy_minus_human_ci95"] = None
        if len(item) and row["balanced_accuracy_minus_human"] is not None:
            hc, mc = confusion_counts(truth, human), confusion_counts(truth, pred)
            values = [*hc, mc[1], mc[3], (truth == human).astype(float), (truth == pred).astype(float), np.ones(len(item))]

            def statistic(s):
                ba_h = balanced_accuracy_from_sums(s[1], s[0], s[3], s[2])
                ba_m = balanced_accuracy_from_sums(s[4], s[0], s[5], s[2])
                return np.column_stack([(ba_m - ba_h)[:, 0], ((s[7] - s[6]) / s[8])[:, 0]])

            d = bootstrap.grouped(statistic, unit=clip, group=np.zeros(len(item), np.int64), values=values,
                                  n_units=int(clip.max()) + 1, n_groups=1)
            row["balanced_accuracy_minus_human_ci95"] = percentile_interval(d[:, 0])
            row["accuracy_minus_human_ci95"] = percentile_interval(d[:, 1])
        out[name] = row
    return out


def votes_of_scored(scored: pd.DataFrame, votes: pd.DataFrame, subset) -> tuple[pd.DataFrame, list]:
    """The human votes on the items scored: ``item`` (the row of ``scored``), ``rater`` (codes in
    name order), ``binary``; and the raters' names."""
    keys = list(subset.item_key)
    at = pd.MultiIndex.from_frame(scored[keys].reset_index(drop=True)).get_indexer(pd.MultiIndex.from_frame(votes[keys]))
    v = votes[at >= 0]
    rater_codes, rater_names = pd.factorize(v["rater"], sort=True)
    frame = pd.DataFrame({"item": at[at >= 0], "rater": rater_codes, "binary": v["binary"].astype(np.int64).to_numpy()})
    return frame, list(rater_names)


def scorer_decisions(scored: pd.DataFrame, subset) -> dict[str, np.ndarray]:
    """The decisions scored as a rater's: the model's ``pred_present`` and the sampling prior."""
    prior = scored[subset.prior_column].isin(subset.prior_positive).to_numpy().astype(np.int64)
    return {"model": scored["pred_present"].to_numpy(np.int64), "sampling_prior": prior}


def vs_humans(scored: pd.DataFrame, votes: pd.DataFrame, subset, *, bootstrap: Bootstrap, support: Support) -> dict:
    """``summary.json["vs_humans"]``. ``scored``: the rows scored ok, with the item key,
    ``pred_present`` and ``clip``; ``votes``: votes.csv (item key, ``rater``, ``binary``)."""
    frame, rater_names = votes_of_scored(scored, votes, subset)
    decisions = scorer_decisions(scored, subset)
    clip = scored["clip"].astype(str).to_numpy()
    return {
        "definition": "the model as one more rater, on the humans' own targets (README: Comparing a model with the humans)",
        "chance": {"accuracy": 0.5, "balanced_accuracy": 0.5, "kappa": 0.0},
        "pairwise": pairwise_rows(frame, decisions, rater_names),
        "leave_one_out": loo_rows(frame, decisions, clip, bootstrap=bootstrap, support=support),
        "bootstrap": {"seed": bootstrap.seed, "draws": bootstrap.draws, "unit": "clip", "interval": "percentile 95%"},
    }


def graded_agreement(scored: pd.DataFrame, votes: pd.DataFrame, subset, *, bootstrap: Bootstrap,
                     support: Support) -> dict:
    """``summary.json["graded"]``: Spearman's ρ between the model's similarity and each item's
    mean rating (emo: 0 not, 1 weakly, 2 strongly present; dim: the share of "yes"), overall and
    per category, each with its clip-bootstrap interval; and the human reference on the same
    footing — on every (item, rater) with ≥ 2 other raters, ρ of the rater's rating with the
    mean of the others', and ρ of the model's similarity with those same means."""
    keys = list(subset.item_key)
    code = pd.MultiIndex.from_frame(scored[keys].reset_index(drop=True))
    at = code.get_indexer(pd.MultiIndex.from_frame(votes[keys]))
    v = pd.DataFrame({"item": at, "value": votes["value"].to_numpy(np.float64)})[at >= 0]
    n_items = len(scored)
    total = np.bincount(v["item"], weights=v["value"], minlength=n_items)
    count = np.bincount(v["item"], minlength=n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_rating = total / count
    sims = scored["similarity"].to_numpy(np.float64)
    clips = scored["clip"].astype(str).to_numpy()
    has = count > 0
    category = scored[subset.category_slice].to_numpy()
    by = [{subset.category_slice: r["group"], **{k: r[k] for k in ("rho", "ci95", "n")}}
          for r in spearman_by_group(sims[has], mean_rating[has], clips[has], category[has], bootstrap=bootstrap)]
    # the human reference: each vote against the mean of the item's other votes (≥ 2 others)
    item = v["item"].to_numpy()
    others = count[item] - 1
    keep = others >= 2
    mean_others = (total[item] - v["value"].to_numpy()) / np.where(others > 0, others, 1)
    ref_item = item[keep]
    return {
        "target": "mean rating per item on the subset's scale ("
                  + ", ".join(f"{i} = {label}" for i, label in enumerate(subset.scale)) + ")",
        "overall": spearman_with_interval(sims[has], mean_rating[has], clips[has], bootstrap=bootstrap),
        f"by_{subset.category_slice}": by,
        "human_reference": {
            "definition": "each rater's rating vs the mean of the other raters' (items with >= 2 other raters)",
            "human": spearman_with_interval(v["value"].to_numpy()[keep], mean_others[keep], clips[ref_item], bootstrap=bootstrap),
            "model": spearman_with_interval(sims[ref_item], mean_others[keep], clips[ref_item], bootstrap=bootstrap),
            "reliable": support.reliable(int(keep.sum())),  # comparisons (votes), as the table counts them
        },
    }
