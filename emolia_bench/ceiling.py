"""The noise ceiling: how well *any* scorer could agree with a new human vote, given how noisy
the votes are (``summary.json["rater_models"]["noise_ceiling"]`` and ``["noise_ceiling"]`` of
the benchmark).

**Binary votes** (from the Dawid–Skene fit, :mod:`rater_models`). An item's next vote comes
from a rater drawn as often as each rater voted, so given the item's true class it is "present"
with probability s̄ (present) or 1 − c̄ (absent), s̄ and c̄ the raters' sensitivities and
specificities averaged with those shares. Given the true class, nothing else tells more about
that vote (the votes are independent given the class), so no scorer — however well it hears —
predicts it better than the more likely side: the **ceiling** is the mean over items of

    π · max(s̄, 1 − s̄) + (1 − π) · max(c̄, 1 − c̄),

π = P(present | the item's votes), the Dawid–Skene posterior: the expected accuracy on a
held-out vote of the Bayes predictor that knows each item's class. Beside it: the **votes'
own predictor**, max(v, 1 − v) with v = π s̄ + (1 − π)(1 − c̄) the probability that the next
vote says present given the votes so far (what the existing votes alone predict); the
**constant predictor**, always the side more votes take, max(v̄, 1 − v̄) over all items; and for
a scorer's 0/1 decisions d, its **agreement with the votes**: per item, the share of its votes
equal to d, averaged over items (items weigh alike, as in the ceiling). The humans' figure on
this footing is, per item, the share of its pairs of raters who agree.
``headroom_reached`` = (agreement − constant) / (ceiling − constant); undefined when the
ceiling equals the constant predictor; its ``band`` (:func:`headroom_band`) is the report's
reading of it. Intervals resample items (analysis) or clips
(benchmark) with the fitted rater channels held fixed: they carry the items' sampling, not the
fit's (each channel rests on thousands of votes).

**Graded ratings**: the reliability of an item's *mean* rating, by the Spearman–Brown formula
from the one-way intraclass correlation of single ratings on the items with ≥ 2 ratings,
ICC(1) = (MSB − MSW) / (MSB + (k₀ − 1) MSW), k₀ = (N − Σ nᵢ² / N) / (m − 1) for m items with
nᵢ ratings, N in all (the unbalanced ANOVA estimator); then ρ_k = k ICC / (1 + (k − 1) ICC)
with k the harmonic mean of nᵢ (the mean's error variance goes as the mean of 1/nᵢ). A scorer
correlates with the mean rating at most √ρ_k (for Pearson's r; a guide for Spearman's ρ).
Undefined (None) with fewer than 2 items of ≥ 2 ratings, or when MSB + (k₀ − 1)·MSW is 0.
"""

from __future__ import annotations

import numpy as np

from .resampling import Bootstrap, percentile_interval


def channel_means(sensitivity: np.ndarray, specificity: np.ndarray, votes_per_rater: np.ndarray) -> tuple[float, float]:
    """(s̄, c̄): the raters' sensitivities and specificities weighted by their numbers of votes
    (raters without a channel left out); NaN when no rater has one."""
    share = np.asarray(votes_per_rater, dtype=np.float64)
    known = np.isfinite(sensitivity) & np.isfinite(specificity) & (share > 0)
    if not known.any():
        return float("nan"), float("nan")
    share = share[known] / share[known].sum()
    return float(share @ sensitivity[known]), float(share @ specificity[known])


def vote_agreement(decision: np.ndarray, item: np.ndarray, vote: np.ndarray, n_items: int) -> np.ndarray:
    """Per item: the share of its votes equal to the decision (NaN for an item without a vote)."""
    same = (decision[item] == vote).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(item, weights=same, minlength=n_items) / np.bincount(item, minlength=n_items)


def ceiling_block(posterior: np.ndarray, s_bar: float, c_bar: float, unit: np.ndarray, *, bootstrap: Bootstrap,
                  agreements: dict[str, np.ndarray] | None = None) -> dict:
    """The ceiling, the votes' own predictor, the constant predictor and each scorer's agreement
    (``agreements``: per item, from :func:`vote_agreement`) with the headroom it reaches, each
    with its interval over resamples of ``unit`` (each item's unit code; module docstring).
    Items with a NaN agreement are left out of that scorer's figures."""
    pi = np.asarray(posterior, dtype=np.float64)
    unit = np.asarray(unit, dtype=np.int64)
    agreements = agreements or {}
    if not len(pi) or not (np.isfinite(s_bar) and np.isfinite(c_bar)):
        return {"items": int(len(pi)), "ceiling": None}
    v = pi * s_bar + (1 - pi) * (1 - c_bar)
    columns = [pi * max(s_bar, 1 - s_bar) + (1 - pi) * max(c_bar, 1 - c_bar), np.maximum(v, 1 - v), v,
               *agreements.values()]
    n_units = int(unit.max()) + 1

    def statistic(wu):
        w = wu[:, unit]
        total = w.sum(axis=1)
        ceiling, votes_own, mean_v = [(w @ c) / total for c in columns[:3]]
        constant = np.maximum(mean_v, 1 - mean_v)
        out = [ceiling, votes_own, constant]
        for a in columns[3:]:
            ok = np.isfinite(a)
            with np.errstate(invalid="ignore", divide="ignore"):
                agree = (w[:, ok] @ a[ok]) / w[:, ok].sum(axis=1)
                out += [agree, np.where(ceiling > constant, (agree - constant) / (ceiling - constant), np.nan)]
        return np.column_stack(out)

    with np.errstate(invalid="ignore", divide="ignore"):
        point = statistic(np.ones((1, n_units)))[0]
        draws = bootstrap.map(statistic, n_units, cells_per_resample=len(pi) * (3 + len(agreements))).reshape(-1, len(point))

    def figure(k):
        return {"value": float(point[k]) if np.isfinite(point[k]) else None, "ci95": percentile_interval(draws[:, k])}

    out = {"definition": "expected accuracy on a held-out vote of the Bayes predictor that knows each item's class, "
                         "from the Dawid-Skene fit (README: rater models)",
           "items": int(len(pi)), "mean_sensitivity": s_bar, "mean_specificity": c_bar,
           "ceiling": figure(0), "votes_own_predictor": figure(1), "constant_predictor": figure(2)}
    for j, name in enumerate(agreements):
        agree, headroom = figure(3 + 2 * j), figure(4 + 2 * j)
        out[name] = {"agreement_with_votes": agree, "headroom_reached": headroom,
                     "band": headroom_band(agree, headroom, out["ceiling"]["value"]),
                     "items": int(np.isfinite(agreements[name]).sum())}
    return out


def headroom_band(agree: dict, headroom: dict, ceiling: float | None) -> str:
    """Where a scorer's agreement with the votes sits between the constant predictor and the
    ceiling, read off its interval: "at the ceiling" (the agreement's interval reaches the
    ceiling), "above the constant predictor" (the headroom's interval is above 0), "below the
    constant predictor" (below 0), else "no better than a constant prediction"; "undefined"
    without an interval."""
    a, h = agree.get("ci95"), headroom.get("ci95")
    if a is None or h is None or ceiling is None:
        return "undefined"
    if a[1] >= ceiling:
        return "at the ceiling"
    if h[0] > 0:
        return "above the constant predictor"
    return "below the constant predictor" if h[1] < 0 else "no better than a constant prediction"


def mean_rating_reliability(value: np.ndarray, item: np.ndarray, unit_of_item: np.ndarray, *,
                            bootstrap: Bootstrap) -> dict:
    """ICC(1) of single ratings, the Spearman–Brown reliability of the item mean and its square
    root (the ceiling on a correlation with the mean rating), each with its interval resampling
    the units of ``unit_of_item`` (module docstring). ``value``/``item``: one row per rating,
    item codes 0..m-1."""
    value, item = np.asarray(value, dtype=np.float64), np.asarray(item, dtype=np.int64)
    n_items = int(item.max()) + 1 if len(item) else 0
    n = np.bincount(item, minlength=n_items).astype(np.float64)
    s1 = np.bincount(item, weights=value, minlength=n_items)
    s2 = np.bincount(item, weights=value * value, minlength=n_items)
    keep = n >= 2  # single ratings of items rated once carry no within-item information
    n, s1, s2 = n[keep], s1[keep], s2[keep]
    unit = np.asarray(unit_of_item, dtype=np.int64)[keep]
    n_units = int(unit.max()) + 1 if len(unit) else 0
    with np.errstate(invalid="ignore", divide="ignore"):
        within_item = s2 - s1 * s1 / n  # Σ (x − item mean)² per item

    def statistic(wu):
        w = wu[:, unit]  # how often each item was drawn
        m, big_n = w.sum(axis=1), w @ n
        with np.errstate(invalid="ignore", divide="ignore"):
            grand = (w @ s1) / big_n
            ssb = w @ (s1 * s1 / n) - big_n * grand * grand
            ssw = w @ within_item
            msb, msw = ssb / (m - 1), ssw / (big_n - m)
            k0 = (big_n - (w @ (n * n)) / big_n) / (m - 1)
            icc = (msb - msw) / (msb + (k0 - 1) * msw)
            k = m / (w @ (1 / n))  # harmonic mean of the ratings per item
            sb = k * icc / (1 + (k - 1) * icc)
            return np.column_stack([icc, sb, np.sqrt(np.clip(sb, 0, None)), k])

    out = {"definition": "Spearman-Brown reliability of the mean rating from ICC(1) of single ratings "
                         "(README: rater models)", "items": int(keep.sum()), "ratings": int(n.sum())}
    if keep.sum() < 2:
        return {**out, "icc1": None, "reliability_of_mean": None, "correlation_ceiling": None, "raters_per_item": None}
    point = statistic(np.ones((1, n_units)))[0]
    draws = bootstrap.map(statistic, n_units, cells_per_resample=int(keep.sum())).reshape(-1, 4)
    for k, name in enumerate(("icc1", "reliability_of_mean", "correlation_ceiling")):
        out[name] = {"value": float(point[k]) if np.isfinite(point[k]) else None, "ci95": percentile_interval(draws[:, k])}
    out["raters_per_item"] = float(point[3])
    return out
