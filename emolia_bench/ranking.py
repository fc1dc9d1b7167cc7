"""Threshold-free figures with clip-bootstrap intervals: AUROC, its macro-average over
categories, and Spearman's ρ against graded human labels.

* AUROC (Mann–Whitney, ties count ½): the probability that a random positive row scores above
  a random negative one. In a resample every row counts as often as its clip was drawn, so the
  statistic is a function of, per score level, the positive and negative rows drawn — grouped
  sums of counts, resampled by :func:`resampling.bootstrap_group_sums`. Undefined (NaN,
  dropped from the interval) when a resample lacks a class.
* macro AUROC: the mean over categories (queried emotion / dimension) of each category's AUROC,
  over the categories where it is defined.
* Spearman's ρ: Pearson's correlation of the midranks. In a resample a row drawn w times is w
  tied rows: its midrank is (weight of the rows ranked below) + (weight of its tie group + 1) / 2,
  and the correlation is weighted by w — exactly ``scipy.stats.spearmanr`` on the resample
  written out row by row (the tests compare the two). Undefined when either side is constant.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .resampling import BUDGET, bootstrap_statistic, bootstrap_weights, percentile_interval


def _levels(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values (ascending), and how many there are."""
    uniq, inverse = np.unique(values, return_inverse=True)
    return inverse.reshape(-1), len(uniq)


def _auroc_from_levels(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """AUROC of ``… × levels`` counts of positives and negatives per ascending score level."""
    below = np.cumsum(neg, axis=-1) - neg
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (below + neg / 2)).sum(axis=-1) / (pos.sum(axis=-1) * neg.sum(axis=-1))


def auroc_with_intervals(truth: np.ndarray, scores: np.ndarray, clips: np.ndarray, categories: np.ndarray,
                         seed: int, draws: int) -> dict:
    """``{"auroc", "auroc_ci95", "macro_auroc", "macro_auroc_ci95", "n_categories"}`` (module
    docstring); values None where undefined."""
    t = np.asarray(truth, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    if len(t) == 0:
        return {"auroc": None, "auroc_ci95": None, "macro_auroc": None, "macro_auroc_ci95": None, "n_categories": 0}
    clip = pd.factorize(pd.Series(clips).astype(str), sort=True)[0]
    level, n_levels = _levels(s)
    groups, spans = [level], [(0, n_levels)]
    cat_codes, cats = pd.factorize(pd.Series(categories), sort=True)
    offset = n_levels
    for c in range(len(cats)):
        rows = np.flatnonzero(cat_codes == c)
        lv, n = _levels(s[rows])
        g = np.full(len(t), -1)
        g[rows] = offset + lv
        groups.append(g)
        spans.append((offset, offset + n))
        offset += n
    unit = np.concatenate([clip] + [clip[g >= 0] for g in groups[1:]])
    group = np.concatenate([groups[0]] + [g[g >= 0] for g in groups[1:]])
    pos = np.concatenate([t] + [t[g >= 0] for g in groups[1:]])

    def statistic(sums):
        p, n = sums
        overall = _auroc_from_levels(p[:, spans[0][0]:spans[0][1]], n[:, spans[0][0]:spans[0][1]])
        per = np.column_stack([_auroc_from_levels(p[:, a:b], n[:, a:b]) for a, b in spans[1:]]) if len(spans) > 1 \
            else np.full((len(p), 1), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.column_stack([overall, np.nanmean(per, axis=1)])

    full = statistic([np.bincount(group, weights=pos, minlength=offset)[None, :],
                      np.bincount(group, weights=1 - pos, minlength=offset)[None, :]])[0]
    stats = bootstrap_statistic(unit, group, [pos, 1 - pos], int(clip.max()) + 1, offset, statistic, draws, seed)
    defined = [bool(t[cat_codes == c].min() != t[cat_codes == c].max()) for c in range(len(cats))]
    return {"auroc": float(full[0]) if np.isfinite(full[0]) else None, "auroc_ci95": percentile_interval(stats[:, 0]),
            "macro_auroc": float(full[1]) if np.isfinite(full[1]) else None,
            "macro_auroc_ci95": percentile_interval(stats[:, 1]), "n_categories": int(sum(defined))}


def _weighted_midranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Midranks of ``values`` with each row counted ``w`` times (``w``: resamples × rows)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    cum = np.cumsum(w[:, order], axis=1)
    before = np.where(starts > 0, cum[:, np.maximum(starts - 1, 0)], 0.0)
    total = cum[:, ends - 1] - before
    level_of = np.repeat(np.arange(len(starts)), ends - starts)
    ranks = np.empty_like(w)
    ranks[:, order] = (before + (total + 1) / 2)[:, level_of]
    return ranks


def weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of weights ``w`` (resamples × rows; see the module docstring)."""
    rx, ry = _weighted_midranks(x, w), _weighted_midranks(y, w)
    sw = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (w * rx).sum(1, keepdims=True) / sw, (w * ry).sum(1, keepdims=True) / sw
        cov = (w * (rx - mx) * (ry - my)).sum(1)
        return cov / np.sqrt((w * (rx - mx) ** 2).sum(1) * (w * (ry - my) ** 2).sum(1))


def spearman_with_interval(x: np.ndarray, y: np.ndarray, clips: np.ndarray, seed: int, draws: int) -> dict:
    """``{"rho", "ci95", "n"}``: Spearman's ρ of x and y and its clip-bootstrap interval."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return {"rho": None, "ci95": None, "n": int(len(x))}
    rho = weighted_spearman(x, y, np.ones((1, len(x))))[0]
    clip, uniq = pd.factorize(pd.Series(clips).astype(str), sort=True)
    budget = max(1, BUDGET // max(len(x), 1)) * len(uniq)  # chunks sized by rows, which each resample spans
    stats = np.concatenate([weighted_spearman(x, y, w[:, clip])
                            for w in bootstrap_weights(len(uniq), draws, seed, budget)])
    return {"rho": float(rho) if np.isfinite(rho) else None, "ci95": percentile_interval(stats), "n": int(len(x))}
