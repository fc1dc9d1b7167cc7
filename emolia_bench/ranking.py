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

from .resampling import BUDGET, bootstrap_weights, group_summer, map_chunks, percentile_interval


class GroupedRanks:
    """Precomputed orderings for the weighted midranks of ``values`` within each group.

    ``group`` (0..G-1) must be sorted (rows of a group contiguous). Every midrank is a
    half-integer and every weight an integer, so however the sums below are grouped the results
    are exact, and equal to a direct computation bit for bit."""

    def __init__(self, values: np.ndarray, group: np.ndarray, clip: np.ndarray | None = None):
        self.order = np.lexsort((values, group))
        v, g = values[self.order], group[self.order]
        new_level = np.r_[True, (v[1:] != v[:-1]) | (g[1:] != g[:-1])]
        self.level_start = np.flatnonzero(new_level)
        self.ties = len(self.level_start) < len(v)  # the similarity scores typically have none
        self.level_of = np.cumsum(new_level) - 1
        group_start = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.empty(0, np.int64)
        #: the sorted rows' group boundaries (for sums by group in sorted order)
        self.group_start = group_start
        # each group's first level (what lies before it belongs to other groups)
        self.first_level = self.level_of[group_start]
        self.row_level = np.empty(len(v), np.int64)
        self.row_level[self.order] = self.level_of
        # Few levels (a rating, a mean of ratings): a resample's level weights are the clips' counts
        # summed by level — one product with a clips × levels table instead of passes over rows
        self.level_weights = None
        if clip is not None and len(v) and len(self.level_start) * 8 <= len(v):
            n_clips = int(clip.max()) + 1
            summer = group_summer(clip, self.row_level, [np.ones(len(v))], n_clips, len(self.level_start))
            self.level_weights = lambda wc: summer(wc)[0]
        self.clip_sorted = None if clip is None else clip[self.order]

    def _level_ranks(self, level_w: np.ndarray) -> np.ndarray:
        """Each tie level's midrank (resamples × levels) from the levels' weights."""
        ranks = np.cumsum(level_w, axis=1)  # inclusive of the level
        ranks -= (level_w - 1) * 0.5  # = (weight below) + (level weight + 1) / 2
        if len(self.group_start) > 1:  # weight of the earlier groups is not below anything of this one
            before = ranks[:, self.first_level[1:]] - (level_w[:, self.first_level[1:]] + 1) * 0.5
            ranks -= np.repeat(np.c_[np.zeros(len(ranks)), before], np.diff(np.r_[self.first_level, ranks.shape[1]]), axis=1)
        return ranks

    def midranks_sorted(self, ws: np.ndarray) -> np.ndarray:
        """resamples × rows midranks of the *sorted* rows, for their weights ``ws`` (resamples ×
        rows, in sorted order): (weight of the group's rows below the row's tie level) +
        (the level's weight + 1) / 2."""
        ranks = self._level_ranks(np.add.reduceat(ws, self.level_start, axis=1) if self.ties else ws)
        return ranks[:, self.level_of] if self.ties else ranks

    def row_midranks(self, wc: np.ndarray) -> np.ndarray:
        """resamples × rows midranks in the rows' own order, for the clips' counts ``wc``
        (resamples × clips; needs ``clip`` at construction)."""
        if self.level_weights is not None:
            return self._level_ranks(self.level_weights(wc))[:, self.row_level]
        ranks = np.empty((len(wc), len(self.order)))
        ranks[:, self.order] = self.midranks_sorted(wc[:, self.clip_sorted])
        return ranks


def _group_sums(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.add.reduceat(a, starts, axis=1) if a.shape[1] else np.zeros((len(a), len(starts)))


def _clip_weights(n_rows: int, clip: np.ndarray, draws: int, seed: int):
    """Chunks of per-clip counts (resamples × clips): the resamples of ``bootstrap_weights``,
    chunked by the rows each resample spans."""
    n_clips = int(clip.max()) + 1 if len(clip) else 0
    budget = max(1, BUDGET // max(n_rows, 1)) * max(n_clips, 1)
    yield from bootstrap_weights(n_clips, draws, seed, budget)


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
    # everything in the ranks' sorted order: one gather of the clip counts per chunk, no scatter
    pos = t[rows][ranks.order]
    clip_sorted = clip[rows][ranks.order]
    starts = ranks.group_start

    def statistic(ws):
        wp = ws * pos
        w_pos = _group_sums(wp, starts)
        a = _auroc(_group_sums(wp * ranks.midranks_sorted(ws), starts), w_pos, _group_sums(ws, starts) - w_pos)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.column_stack([a[:, 0], np.nanmean(a[:, 1:], axis=1)])

    full = statistic(np.ones((1, len(rows))))[0]
    stats = map_chunks(lambda w: statistic(w[:, clip_sorted]), _clip_weights(len(rows), clip[rows], draws, seed))
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
    sizes = np.diff(np.r_[starts, len(x)])
    rx, ry = GroupedRanks(x, code, clip), GroupedRanks(y, code, clip)

    def statistic(wc):
        w = wc[:, clip]
        a, b = rx.row_midranks(wc), ry.row_midranks(wc)
        sw = _group_sums(w, starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            # Σ w·midrank over a group is W(W + 1)/2 whatever the order (the midranks share out
            # positions 1..W), exactly: the same number as summing it, without two passes
            mean = sw * (sw + 1) / 2 / sw
            mean = mean[:, :1] if len(starts) == 1 else np.repeat(mean, sizes, axis=1)  # (broadcast: no gather)
            da, db = a - mean, b - mean
            wda, wdb = w * da, w * db
            return _group_sums(wda * db, starts) / np.sqrt(_group_sums(wda * da, starts) * _group_sums(wdb * db, starts))

    full = statistic(np.ones((1, int(clip.max()) + 1)))[0]
    stats = map_chunks(statistic, _clip_weights(len(x), clip, draws, seed))
    return [{"group": labels[g], "rho": float(full[j]) if np.isfinite(full[j]) and sizes[j] >= 2 else None,
             "ci95": percentile_interval(stats[:, j]) if sizes[j] >= 2 else None, "n": int(sizes[j])}
            for j, g in enumerate(np.unique(code))]


def spearman_with_interval(x: np.ndarray, y: np.ndarray, clips: np.ndarray, seed: int, draws: int) -> dict:
    """``{"rho", "ci95", "n"}``: Spearman's ρ of x and y over all rows, with its clip-bootstrap interval."""
    out = spearman_by_group(x, y, clips, np.zeros(len(x), np.int64), seed, draws)
    if not out:
        return {"rho": None, "ci95": None, "n": 0}
    return {k: out[0][k] for k in ("rho", "ci95", "n")}
