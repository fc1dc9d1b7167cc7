"""Threshold-free figures with clip-bootstrap intervals: AUROC, its macro-average over
categories, and Spearman's ρ against graded human labels.

Both are rank statistics of *weighted* rows: in a resample a row whose clip was drawn w times
counts as w tied rows, and the unresampled figure is the same computation with every w = 1.
Within a group (a category, or all rows) a row's weighted midrank is

    (weight of the group's rows with a lower value) + (weight of its tie level + 1) / 2,

read off one running sum of the tie levels' weights in (group, value) order
(:meth:`Levels.midranks`); a level's weight in a resample is one sparse product of the clips'
counts (rows of each clip in each level), so the work follows the number of distinct values.
Then

* AUROC (Mann–Whitney, ties count ½) = (Σ_pos w·rank − W₊(W₊ + 1)/2) / (W₊ W₋), with W₊, W₋
  the weights of positive and negative rows; undefined (NaN; None in outputs, dropped from the
  interval) when a class is absent. The macro AUROC is the mean over the categories where it is
  defined; undefined when it is defined in none.
* Spearman's ρ = the w-weighted Pearson correlation of the midranks of x and y, whose weighted
  mean is (W + 1)/2; undefined when either side is constant or the group has fewer than 2 rows.

Midranks are half-integers and weights integers, so every sum is exact: the figures equal
``roc_auc_score`` and ``spearmanr`` on the resample written out row by row (the tests compare
them resample by resample).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from .resampling import Bootstrap, percentile_interval


class Levels:
    """The tie levels of ``values`` within ``group`` (codes 0..G-1, all present): levels ordered
    by (group, value), each row's level, each level's group and where each group's levels start."""

    def __init__(self, values: np.ndarray, group: np.ndarray):
        order = np.lexsort((values, group))
        v, g = values[order], group[order]
        new_level = np.r_[True, (v[1:] != v[:-1]) | (g[1:] != g[:-1])]
        self.of_row = np.empty(len(v), np.int64)
        self.of_row[order] = np.cumsum(new_level) - 1
        self.group = g[new_level]
        self.n = len(self.group)
        self.group_start = np.flatnonzero(np.r_[True, self.group[1:] != self.group[:-1]])
        self.group_last = np.r_[self.group_start[1:] - 1, self.n - 1]

    def counter(self, clip: np.ndarray, n_clips: int, weights: np.ndarray | None = None) -> sparse.csr_array:
        """levels × clips: the rows (or their ``weights``) of each clip in each level, so that
        ``counter @ W`` gives each level's weight in every resample of W (clips × resamples)."""
        w = np.ones(len(clip)) if weights is None else np.asarray(weights, dtype=np.float64)
        return sparse.csr_array((w, (self.of_row, clip)), shape=(self.n, n_clips))

    def midranks(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ranks, W_g, B_g)`` from the levels' weights (levels × resamples): each level's
        weighted midrank counted over all groups in order, each group's weight and the weight of
        the groups before it (groups × resamples); a level's midrank *within its group* is its
        rank − B_g. With C the running sum of the weights, a level ending at C with weight W_t
        spans positions C − W_t + 1 … C, so its midrank is C − (W_t − 1)/2."""
        ranks = np.cumsum(weights, axis=0)
        group_end = ranks[self.group_last]
        before = np.vstack([np.zeros((1, weights.shape[1])), group_end[:-1]])
        ranks -= 0.5 * weights  # in place: every term is a half-integer, so the order is exact
        ranks += 0.5
        return ranks, group_end - before, before

    def per_level(self, by_group: np.ndarray) -> np.ndarray:
        """A groups × resamples array spread to the levels (one group: broadcast, no copy)."""
        return by_group if len(by_group) == 1 else by_group[self.group]


def _by_group(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of consecutive blocks of rows starting at ``starts``, as resamples × blocks (C order:
    numpy's sums over an axis follow the layout, and the macro mean must sum as it always has)."""
    return np.ascontiguousarray(np.add.reduceat(a, starts, axis=0).T)


def _codes(labels) -> tuple[np.ndarray, list]:
    codes, uniq = pd.factorize(pd.Series(labels), sort=True)
    return codes.astype(np.int64), list(uniq)


def _clip_codes(clips) -> np.ndarray:
    return pd.factorize(pd.Series(clips).astype(str), sort=True)[0].astype(np.int64)


def auroc_by_group(truth: np.ndarray, scores: np.ndarray, clip: np.ndarray, group: np.ndarray):
    """The statistic ``clip counts (resamples × clips) -> AUROC of each group (resamples ×
    groups)`` for rows with 0/1 ``truth``, ``scores``, clip codes and group codes 0..G-1 (all
    present): Σ_pos w·rank summed level by level, from the levels' weights and positives' weights."""
    levels = Levels(scores, group)
    n_clips = int(clip.max()) + 1
    all_rows, positives = levels.counter(clip, n_clips), levels.counter(clip, n_clips, truth)

    def statistic(wc):
        wcT = np.ascontiguousarray(wc.T)  # clips × resamples
        w_level, w_pos_level = all_rows @ wcT, positives @ wcT
        ranks, w_group, before = levels.midranks(w_level)
        w_pos = _by_group(w_pos_level, levels.group_start)
        w_pos_level *= ranks
        rank_sum = _by_group(w_pos_level, levels.group_start) - before.T * w_pos  # ranks within the group
        with np.errstate(invalid="ignore", divide="ignore"):
            return (rank_sum - w_pos * (w_pos + 1) / 2) / (w_pos * (w_group.T - w_pos))

    return statistic


def auroc(truth, scores) -> float | None:
    """AUROC of ``scores`` against 0/1 ``truth`` (module docstring); None unless both classes
    are present."""
    t, s = np.asarray(truth, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    if len(t) == 0:
        return None
    value = auroc_by_group(t, s, np.arange(len(t)), np.zeros(len(t), np.int64))(np.ones((1, len(t))))[0, 0]
    return float(value) if np.isfinite(value) else None


def auroc_draws(truth: np.ndarray, scores: np.ndarray, clips: np.ndarray, categories: np.ndarray, *,
                bootstrap: Bootstrap) -> tuple[np.ndarray, np.ndarray]:
    """``(values, draws)``: the pooled AUROC and the macro AUROC over categories (NaN where
    undefined), and the same two on every clip resample (``draws × 2``). Rows must not be empty."""
    t = np.asarray(truth, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    clip = _clip_codes(clips)
    cat, _ = _codes(categories)
    # the rows twice: once all together (group 0), once by category (groups 1..C)
    rows = np.r_[np.arange(len(t)), np.arange(len(t))]
    by_group = auroc_by_group(t[rows], s[rows], clip[rows], np.r_[np.zeros(len(t), np.int64), cat + 1])

    def statistic(wc):
        a = by_group(wc)
        # numpy's nanmean, written out: its warning filter is not thread-safe, and a resample
        # (or a reference with one class) where no category is defined is NaN, not a warning
        by_cat = a[:, 1:]
        defined = ~np.isnan(by_cat)
        with np.errstate(invalid="ignore", divide="ignore"):
            macro = np.where(defined, by_cat, 0.0).sum(axis=1) / defined.sum(axis=1)
        return np.column_stack([a[:, 0], macro])

    n_clips = int(clip.max()) + 1
    draws = bootstrap.map(statistic, n_clips, cells_per_resample=len(rows))
    return statistic(np.ones((1, n_clips)))[0], draws.reshape(-1, 2)  # (no draws: 0 × 2)


def auroc_with_intervals(truth: np.ndarray, scores: np.ndarray, clips: np.ndarray, categories: np.ndarray, *,
                         bootstrap: Bootstrap) -> dict:
    """``{"auroc", "auroc_ci95", "macro_auroc", "macro_auroc_ci95", "n_categories"}`` (module
    docstring), resampling clips; values None where undefined. ``n_categories``: categories
    whose AUROC is defined (both classes present)."""
    t = np.asarray(truth, dtype=np.float64)
    if len(t) == 0:
        return {"auroc": None, "auroc_ci95": None, "macro_auroc": None, "macro_auroc_ci95": None, "n_categories": 0}
    full, stats = auroc_draws(truth, scores, clips, categories, bootstrap=bootstrap)
    cat, _ = _codes(categories)
    defined = [bool(t[cat == c].min() != t[cat == c].max()) for c in np.unique(cat)]
    return {"auroc": float(full[0]) if np.isfinite(full[0]) else None, "auroc_ci95": percentile_interval(stats[:, 0]),
            "macro_auroc": float(full[1]) if np.isfinite(full[1]) else None,
            "macro_auroc_ci95": percentile_interval(stats[:, 1]), "n_categories": int(sum(defined))}


def spearman_by_group_statistic(x: np.ndarray, y: np.ndarray, clip: np.ndarray, group: np.ndarray):
    """The statistic ``clip counts (resamples × clips) -> ρ of each group (resamples × groups)``
    for rows with group codes 0..G-1 (all present). Rows with the same (x level, y level) are one
    cell: each resample's cell weights N come from the clip counts, the levels' weights are sums
    of N, and with a, b the levels' midranks and m = (W_g + 1)/2,
    ρ = Σ N (a − m)(b − m) / √(Σ W_x (a − m)² · Σ W_y (b − m)²). Deviations are half-integers
    and weights integers: every sum is exact."""
    lx, ly = Levels(x, group), Levels(y, group)
    cells, cell_of_row = np.unique(lx.of_row * ly.n + ly.of_row, return_inverse=True)
    cx, cy = cells // ly.n, cells % ly.n  # cells come in x-level order, so in group order
    n_clips, ones = int(clip.max()) + 1, np.ones(len(cells))
    rows_of_cell = sparse.csr_array((np.ones(len(clip)), (cell_of_row.ravel(), clip)), shape=(len(cells), n_clips))
    to_x = sparse.csr_array((ones, (cx, np.arange(len(cells)))), shape=(lx.n, len(cells)))
    to_y = sparse.csr_array((ones, (cy, np.arange(len(cells)))), shape=(ly.n, len(cells)))
    cell_group_start = np.searchsorted(lx.group[cx], np.arange(len(lx.group_start)))

    def statistic(wc):
        n = rows_of_cell @ np.ascontiguousarray(wc.T)  # cells × resamples
        w_x, w_y = to_x @ n, to_y @ n
        da, w_group, before = lx.midranks(w_x)
        db, _, _ = ly.midranks(w_y)
        mean = before + (w_group + 1) / 2  # each group's mean rank, counted over all groups in order
        da -= lx.per_level(mean)
        db -= ly.per_level(mean)
        s_xy = _by_group(n * da[cx] * db[cy], cell_group_start)
        s_xx = _by_group(w_x * da * da, lx.group_start)
        s_yy = _by_group(w_y * db * db, ly.group_start)
        with np.errstate(invalid="ignore", divide="ignore"):
            return s_xy / np.sqrt(s_xx * s_yy)

    return statistic


def spearman_by_group(x: np.ndarray, y: np.ndarray, clips: np.ndarray, groups, *, bootstrap: Bootstrap) -> list[dict]:
    """Spearman's ρ of x and y within each group (sorted labels), with its clip-bootstrap
    interval: ``[{"group", "rho", "ci95", "n"}]``, all groups read off the same resamples;
    ``rho`` and ``ci95`` None for a group of fewer than 2 rows or where undefined."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    code, labels = _codes(groups)
    if len(x) == 0:
        return []
    order = np.argsort(code, kind="stable")
    x, y, code = x[order], y[order], code[order]
    clip = _clip_codes(clips)[order]
    sizes = np.bincount(code)
    statistic = spearman_by_group_statistic(x, y, clip, code)
    n_clips = int(clip.max()) + 1
    full = statistic(np.ones((1, n_clips)))[0]
    stats = bootstrap.map(statistic, n_clips, cells_per_resample=len(x))
    return [{"group": labels[g], "rho": float(full[j]) if np.isfinite(full[j]) and sizes[j] >= 2 else None,
             "ci95": percentile_interval(stats[:, j]) if sizes[j] >= 2 else None, "n": int(sizes[j])}
            for j, g in enumerate(np.unique(code))]


def spearman_with_interval(x: np.ndarray, y: np.ndarray, clips: np.ndarray, *, bootstrap: Bootstrap) -> dict:
    """``{"rho", "ci95", "n"}``: Spearman's ρ of x and y over all rows, with its clip-bootstrap interval."""
    out = spearman_by_group(x, y, clips, np.zeros(len(x), np.int64), bootstrap=bootstrap)
    if not out:
        return {"rho": None, "ci95": None, "n": 0}
    return {k: out[0][k] for k in ("rho", "ci95", "n")}
