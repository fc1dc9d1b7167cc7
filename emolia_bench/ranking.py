"""Threshold-free figures with clip-bootstrap intervals: AUROC, its macro-average over
categories, and Spearman's ρ against graded human labels.

Both are rank statistics. In a resample a row drawn w times is w tied rows, so every figure is
computed from *weighted midranks*: a row's rank is (weight of the rows below it) + (weight of
its tie group + 1) / 2, within its group (a category, or all rows). Then

* AUROC (Mann–Whitney, ties count ½) = (Σ_pos w·rank − W₊(W₊ + 1)/2) / (W₊ W₋), with W₊, W₋ the
  weights of positive and negative rows; undefined (NaN, dropped from the interval) when a
  class is absent. The macro AUROC is the mean over the categories where it is defined.
* Spearman's ρ = the w-weighted Pearson correlation of the midranks of x and y; undefined when
  either side is constant.

That is exactly ``roc_auc_score`` and ``spearmanr`` on the resample written out row by row (the
tests compare them). Each resample draws the clips (``resampling.bootstrap_weights``: the same
stream every other interval uses) and every group's figure is read off that one resample, in
one vectorised pass over the rows.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .resampling import BUDGET, bootstrap_weights, percentile_interval


class GroupedRanks:
    """Precomputed orderings for the weighted midranks of ``values`` within each group.

    ``group`` (0..G-1) must be sorted (rows of a group contiguous)."""

    def __init__(self, values: np.ndarray, group: np.ndarray):
        self.order = np.lexsort((values, group))
        v, g = values[self.order], group[self.order]
        new_level = np.r_[True, (v[1:] != v[:-1]) | (g[1:] != g[:-1])]
        self.level_start = np.flatnonzero(new_level)
        self.level_end = np.r_[self.level_start[1:], len(v)]
        self.level_of = np.cumsum(new_level) - 1
        group_start = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.empty(0, np.int64)
        first = np.zeros(len(g), dtype=np.int64)
        first[group_start] = group_start
        self.group_first = np.maximum.accumulate(first)[self.level_start] if len(g) else np.empty(0, np.int64)

    def midranks(self, w: np.ndarray) -> np.ndarray:
        """resamples × rows midranks (in the rows' order) for the weights ``w`` (resamples × rows)."""
        cum0 = np.zeros((len(w), w.shape[1] + 1))  # cum0[:, i] = weight of the sorted rows before i
        np.cumsum(w[:, self.order], axis=1, out=cum0[:, 1:])
        start = cum0[:, self.level_start]
        level_rank = start - cum0[:, self.group_first] + (cum0[:, self.level_end] - start + 1) / 2
        ranks = np.empty_like(w)
        # without ties every row is its own level: no gather (the similarity scores, typically)
        ranks[:, self.order] = level_rank if len(self.level_start) == w.shape[1] else level_rank[:, self.level_of]
        return ranks


def _group_sums(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.add.reduceat(a, starts, axis=1) if a.shape[1] else np.zeros((len(a), len(starts)))


def _resampled(n_rows: int, clip: np.ndarray, draws: int, seed: int):
    """Chunks of per-row weights (resamples × rows): each row counts as often as its clip was drawn."""
    n_clips = int(clip.max()) + 1 if len(clip) else 0
    budget = max(1, BUDGET // max(n_rows, 1)) * max(n_clips, 1)  # chunks sized by the rows each resample spans
    for w in bootstrap_weights(n_clips, draws, seed, budget):
        yield w[:, clip]


def _groups(labels) -> tuple[np.ndarray, list]:
    codes, uniq = pd.factorize(pd.Series(labels), sort=True)
    return codes.astype(np.int64), list(uniq)


def _auroc(ranks_pos_sum, w_pos, w_neg):
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ranks_pos_sum - w_pos * (w_pos + 1) / 2) / (w_pos * w_neg)


def auroc_with_intervals(truth: np.ndarray, scores: np.ndarray, clips: np.ndarray, categories: np.ndarray,
                         seed: int, draws: int) -> dict:
    """``{"auroc", "auroc_ci95", "macro_auroc", "macro_auroc_ci95", "n_categories"}`` (module
    docstring); values None where undefined."""
    t = np.asarray(truth, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    if len(t) == 0:
        return {"auroc": None, "auroc_ci95": None, "macro_auroc": None, "macro_auroc_ci95": None, "n_categories": 0}
    clip = pd.factorize(pd.Series(clips).astype(str), sort=True)[0]
    cat, _ = _groups(categories)
    # the rows twice: once all together (group 0), once by category (groups 1..C), contiguous
    by_cat = np.argsort(cat, kind="stable")
    rows = np.concatenate([np.arange(len(t)), by_cat])
    group = np.concatenate([np.zeros(len(t), np.int64), cat[by_cat] + 1])
    ranks = GroupedRanks(s[rows], group)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    pos = t[rows]

    def statistic(w):
        r = ranks.midranks(w)
        a = _auroc(_group_sums(w * r * pos, starts), _group_sums(w * pos, starts), _group_sums(w * (1 - pos), starts))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.column_stack([a[:, 0], np.nanmean(a[:, 1:], axis=1)])

    full = statistic(np.ones((1, len(rows))))[0]
    stats = np.concatenate([statistic(w) for w in _resampled(len(rows), clip[rows], draws, seed)])
    defined = [bool(t[cat == c].min() != t[cat == c].max()) for c in np.unique(cat)]
    return {"auroc": float(full[0]) if np.isfinite(full[0]) else None, "auroc_ci95": percentile_interval(stats[:, 0]),
            "macro_auroc": float(full[1]) if np.isfinite(full[1]) else None,
            "macro_auroc_ci95": percentile_interval(stats[:, 1]), "n_categories": int(sum(defined))}


def spearman_by_group(x: np.ndarray, y: np.ndarray, clips: np.ndarray, groups, seed: int, draws: int) -> list[dict]:
    """Spearman's ρ of x and y within each group (sorted labels), with its clip-bootstrap
    interval: ``[{"group", "rho", "ci95", "n"}]``, all groups read off the same resamples."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    code, labels = _groups(groups)
    if len(x) == 0:
        return []
    order = np.argsort(code, kind="stable")
    x, y, code = x[order], y[order], code[order]
    clip = pd.factorize(pd.Series(clips).astype(str), sort=True)[0][order]
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    rx, ry = GroupedRanks(x, code), GroupedRanks(y, code)

    def statistic(w):
        a, b = rx.midranks(w), ry.midranks(w)
        sw = _group_sums(w, starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            ma, mb = (_group_sums(w * a, starts) / sw)[:, code], (_group_sums(w * b, starts) / sw)[:, code]
            da, db = a - ma, b - mb
            return _group_sums(w * da * db, starts) / np.sqrt(_group_sums(w * da * da, starts) * _group_sums(w * db * db, starts))

    full = statistic(np.ones((1, len(x))))[0]
    stats = np.concatenate([statistic(w) for w in _resampled(len(x), clip, draws, seed)])
    sizes = np.diff(np.r_[starts, len(x)])
    return [{"group": labels[g], "rho": float(full[j]) if np.isfinite(full[j]) and sizes[j] >= 2 else None,
             "ci95": percentile_interval(stats[:, j]) if sizes[j] >= 2 else None, "n": int(sizes[j])}
            for j, g in enumerate(np.unique(code))]


def spearman_with_interval(x: np.ndarray, y: np.ndarray, clips: np.ndarray, seed: int, draws: int) -> dict:
    """``{"rho", "ci95", "n"}``: Spearman's ρ of x and y over all rows, with its clip-bootstrap interval."""
    out = spearman_by_group(x, y, clips, np.zeros(len(x), np.int64), seed, draws)
    if not out:
        return {"rho": None, "ci95": None, "n": 0}
    return {k: out[0][k] for k in ("rho", "ci95", "n")}
