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

import warnings

import numpy as np
import pandas as pd

from .agreement import (
    co_rated_pairs,
    kappas_from_tables,
    loo_comparisons,
    pair_codes,
    pair_tables,
    pairwise_accuracy,
)
from .metrics import balanced_accuracy_from_sums, binary_metrics, confusion_counts
from .ranking import spearman_by_group, spearman_with_interval
from .resampling import Bootstrap, group_sums, percentile_interval
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
        row["balanced_accuracy_minus_human_raters_as_sampled_ci95"] = None
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
            row["balanced_accuracy_minus_human_raters_as_sampled_ci95"] = loo_raters_as_sampled(
                truth, human, pred, comp["rater"].to_numpy(np.int64), row["balanced_accuracy_minus_human"], d[:, 0])
        out[name] = row
    return out


def loo_raters_as_sampled(truth: np.ndarray, human: np.ndarray, pred: np.ndarray, held_out: np.ndarray,
                          value: float, clip_draws: np.ndarray) -> list[float] | None:
    """The leave-one-out Δ balanced accuracy (model − human) with the raters as a sample: the
    clip-bootstrap variance plus the delete-one-rater jackknife over the held-out raters (each
    rater's comparisons left out in turn, the targets as they are), θ ± t_{m−1, 0.975} ·
    √(v_clips + v_raters), cut to [−1, 1]; None with fewer than three held-out raters
    (:func:`raters_as_sampled` says why). bench/coverage_raters.py measures its coverage."""
    from scipy.stats import t as student_t

    raters = np.unique(held_out)
    m = len(raters)
    finite = clip_draws[np.isfinite(clip_draws)]
    if m < 3 or len(finite) < 2:
        return None
    jack = []
    for r in raters:
        keep = held_out != r
        h, mo = binary_metrics(truth[keep], human[keep]), binary_metrics(truth[keep], pred[keep])
        if h["balanced_accuracy"] is None or mo["balanced_accuracy"] is None:
            return None
        jack.append(mo["balanced_accuracy"] - h["balanced_accuracy"])
    jack = np.array(jack)
    v_raters = (m - 1) / m * float(np.sum((jack - jack.mean()) ** 2))
    half = float(student_t.ppf(0.975, m - 1)) * float(np.sqrt(np.var(finite, ddof=1) + v_raters))
    return [max(-1.0, value - half), min(1.0, value + half)]


def votes_of_scored(scored: pd.DataFrame, votes: pd.DataFrame, subset) -> tuple[pd.DataFrame, list]:
    """The human votes on the items scored: ``item`` (the row of ``scored``), ``rater`` (codes in
    name order), ``binary``, ``value``; and the raters' names."""
    keys = list(subset.item_key)
    at = pd.MultiIndex.from_frame(scored[keys].reset_index(drop=True)).get_indexer(pd.MultiIndex.from_frame(votes[keys]))
    v = votes[at >= 0]
    rater_codes, rater_names = pd.factorize(v["rater"], sort=True)
    frame = pd.DataFrame({"item": at[at >= 0], "rater": rater_codes, "binary": v["binary"].astype(np.int64).to_numpy(),
                          "value": v["value"].astype(np.float64).to_numpy()})
    return frame, list(rater_names)


def scorer_decisions(scored: pd.DataFrame, subset) -> dict[str, np.ndarray]:
    """The decisions scored as a rater's: the model's ``pred_present`` and the sampling prior."""
    prior = subset.prior_present(scored)
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
        # [ours] the pairwise figures with raters regarded as a sample of raters
        "raters_as_sampled": raters_as_sampled(frame, decisions["model"], clip, bootstrap=bootstrap),
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


def raters_as_sampled(votes: pd.DataFrame, decision: np.ndarray, clip_of_item: np.ndarray, *,
                      bootstrap: Bootstrap) -> dict:
    """The pairwise figures of the model and the humans with two intervals each: "these raters"
    (clips resampled, the raters fixed) and "raters as sampled" (the raters regarded as drawn from
    a population of raters, as a paper's claim about "human agreement" does).

    Figures: the model's accuracy against each rater's votes averaged over raters (A), the human
    pairwise accuracy averaged over rater pairs (H, the ceiling), and Δ = A − H. Point values are
    :func:`pairwise_rows`' figures.

    "Raters as sampled" adds to the clip-bootstrap variance the raters' own: the delete-one-rater
    jackknife variance ((m − 1)/m · Σ (θ₋ᵣ − θ̄)², over the m raters: each rater left out with
    every pair they are in), the standard variance estimate for a mean or U-statistic over a few
    sampled units when resampling them with replacement is degenerate — with three raters, a
    rater bootstrap draws one rater three times in one resample of nine. The interval is
    θ ± t_{df, 0.975} · √(v_clips + v_raters), the t quantile because the rater variance rests on
    m raters: df = m − 1 for A (a mean over raters), m − 2 for H and Δ (a mean over rater pairs,
    whose jackknife variance varies more; with m − 1 its coverage fell to 0.913 with five raters
    in the simulation). Needs m ≥ 3 (a pair must be left when a rater is); with fewer, None.
    The interval is cut to the figure's range ([0, 1]; [−1, 1] for Δ). With three raters the
    pairwise intervals span most of it: three people say little about raters in general. Coverage where every repetition draws new raters: bench/coverage_raters.py.
    """
    from scipy.stats import t as student_t

    item, rater, vote = (votes[c].to_numpy(np.int64) for c in ("item", "rater", "binary"))
    raters = np.unique(rater)
    m = len(raters)
    pairs = co_rated_pairs(votes)
    pair, pa, pb = pair_codes(pairs)
    clip_codes, clip_names = pd.factorize(pd.Series(clip_of_item).astype(str), sort=True)
    n_clips = len(clip_names)
    agree_model = (decision[item] == vote).astype(np.float64)
    agree_pair = (pairs["binary_a"].to_numpy() == pairs["binary_b"].to_numpy()).astype(np.float64)
    rater_code = np.searchsorted(raters, rater)
    # per rater / per pair: (agreements, comparisons) as grouped sums over clip resamples
    model_sums = group_sums(clip_codes[item], rater_code, [agree_model, np.ones(len(item))], n_clips, m)
    pair_sums = group_sums(clip_codes[pairs["item"].to_numpy(np.int64)], pair, [agree_pair, np.ones(len(pairs))],
                           n_clips, len(pa))
    a_idx, b_idx = np.searchsorted(raters, pa), np.searchsorted(raters, pb)

    def figures(w: np.ndarray, left_out: int | None = None) -> np.ndarray:
        """(A, H, Δ) per resample row of w; ``left_out``: a rater index dropped with its pairs."""
        agree, count = model_sums(w)
        pagree, pcount = pair_sums(w)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_rater, per_pair = agree / count, pagree / pcount
        keep_r = np.arange(m) != left_out if left_out is not None else np.ones(m, bool)
        keep_p = ((a_idx != left_out) & (b_idx != left_out)) if left_out is not None else np.ones(len(pa), bool)
        with np.errstate(invalid="ignore"):
            a = np.nanmean(per_rater[:, keep_r], axis=1) if keep_r.any() else np.full(len(w), np.nan)
            h = np.nanmean(per_pair[:, keep_p], axis=1) if keep_p.any() else np.full(len(w), np.nan)
        return np.column_stack([a, h, a - h])

    names = ("model_accuracy", "human_pairwise_accuracy", "model_minus_human")
    out = {"raters": int(m), "unit": "clip; raters as sampled: + delete-one-rater jackknife",
           "definition": "A: the model's accuracy against each rater, averaged over raters; H: the human pairwise "
                         "accuracy, averaged over pairs; Δ = A − H"}
    if m < 2 or len(pa) == 0 or n_clips == 0:
        return {**out, **{n: {"value": None, "these_raters_ci95": None, "raters_as_sampled_ci95": None} for n in names}}
    ones = np.ones((1, n_clips))
    point = figures(ones)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample without a rater's items: NaN, dropped
        draws = bootstrap.map(figures, n_clips)
        jack = np.array([figures(ones, r)[0] for r in range(m)]) if m >= 3 else None
    for k, name in enumerate(names):
        these = percentile_interval(draws[:, k])
        sampled = None
        finite = draws[np.isfinite(draws[:, k]), k]
        if jack is not None and np.isfinite(point[k]) and len(finite) > 1:
            v_raters = (m - 1) / m * float(np.sum((jack[:, k] - jack[:, k].mean()) ** 2))
            df = m - 1 if name == "model_accuracy" else m - 2  # a mean over raters; over rater pairs
            half = float(student_t.ppf(0.975, df)) * float(np.sqrt(np.var(finite, ddof=1) + v_raters))
            low, high = (-1.0, 1.0) if name == "model_minus_human" else (0.0, 1.0)  # the figure's own range
            sampled = [max(low, float(point[k] - half)), min(high, float(point[k] + half))]
        out[name] = {"value": float(point[k]) if np.isfinite(point[k]) else None,
                     "these_raters_ci95": list(these) if these else None, "raters_as_sampled_ci95": sampled}
    return out
