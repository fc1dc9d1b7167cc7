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
stream every other interval uses) and every group's figure is read off that one resample,
vectorised over a chunk of resamples × rows. Midranks come from one running sum of the weights
in sorted order (:func:`_running_midranks`), and a variable with few distinct values (a rating, a
mean rating) is handled by its levels' weights instead of row by row; every sum involved is of
integers and half-integers, so these shortcuts give the row-by-row computation's numbers bit for
bit (the tests force each computation and compare).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .resampling import BUDGET, bootstrap_weights, group_summer, map_chunks, percentile_interval


def _counts_by(clip: np.ndarray, key: np.ndarray, n_clips: int, n_keys: int):
    """``f -> f @ M`` with ``M[c, k]`` the rows of clip c with key k: any per-clip quantity of a
    resample (resamples × clips) summed over each key's rows, in one product."""
    summer = group_summer(clip, key, [np.ones(len(clip))], n_clips, n_keys)
    return lambda per_clip: summer(per_clip)[0]


def _group_offsets(running: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From a running sum of weights over columns grouped contiguously (``first``: each group's
    first column): ``(W_g, B_g)``, each group's weight and the weight of the groups before it."""
    last = running[:, np.r_[first[1:] - 1, running.shape[1] - 1]]
    before = np.c_[np.zeros(len(running)), last[:, :-1]]
    return last - before, before


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
            self.level_weights = _counts_by(clip, self.row_level, int(clip.max()) + 1, len(self.level_start))
        self.clip_sorted = None if clip is None else clip[self.order]
        #: the group of each tie level (levels are ordered by group)
        self.level_group = g[self.level_start] if len(v) else np.empty(0, np.int64)

    def _level_ranks(self, level_w: np.ndarray) -> np.ndarray:
        """Each tie level's midrank (resamples × levels) from the levels' weights."""
        ranks = np.cumsum(level_w, axis=1)  # inclusive of the level
        if len(self.group_start) > 1:  # weight of the earlier groups is not below anything of this one
            ranks -= _group_offsets(ranks, self.first_level)[1][:, self.level_group]
        ranks -= (level_w - 1) * 0.5  # = (weight below) + (level weight + 1) / 2
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

    n_clips = int(clip.max()) + 1

    def overall_and_macro(a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.column_stack([a[:, 0], np.nanmean(a[:, 1:], axis=1)])

    def statistic(wc):  # Σ_pos w·midrank from one running sum (_running_midranks); exact integers
        ws = wc[:, clip_sorted]
        r, w_all, before, _ = _running_midranks(ws, ranks)
        ws *= pos
        w_pos = _group_sums(ws, starts)
        r *= pos
        return overall_and_macro(_auroc(_group_sums(r, starts) - before * w_pos, w_pos, w_all - w_pos))

    full = statistic(np.ones((1, n_clips)))[0]
    stats = map_chunks(statistic, _clip_weights(len(rows), clip[rows], draws, seed))
    defined = [bool(t[cat == c].min() != t[cat == c].max()) for c in np.unique(cat)]
    return {"auroc": float(full[0]) if np.isfinite(full[0]) else None, "auroc_ci95": percentile_interval(stats[:, 0]),
            "macro_auroc": float(full[1]) if np.isfinite(full[1]) else None,
            "macro_auroc_ci95": percentile_interval(stats[:, 1]), "n_categories": int(sum(defined))}


def _running_midranks(ws: np.ndarray, ranks: GroupedRanks) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """From the rows' weights ``ws`` in ``ranks``' sorted order (resamples × rows): ``(r, W_g, B_g,
    W_t)`` with r = w × (midrank + B_g) for every row, W_g each group's weight, B_g the weight of
    the groups before it, and W_t each tie level's weight (for untied values: ``ws`` itself). A
    tie level is a block of W_t copies above everything before it in the running sum C, so its
    midrank is C(level's end) − B_g − (W_t − 1)/2: one running sum, no per-group correction."""
    r = np.cumsum(ws, axis=1)
    w_group, before = _group_offsets(r, ranks.group_start)
    if ranks.ties:
        ends = r[:, np.r_[ranks.level_start[1:] - 1, ws.shape[1] - 1]]
        w_tie = np.diff(ends, axis=1, prepend=0.0)
        ends -= (w_tie - 1) * 0.5
        r = ends[:, ranks.level_of]
    else:
        w_tie = ws
        half = ws - 1
        half *= 0.5
        r -= half
    r *= ws
    return r, w_group, before, w_tie


def _spearman_ranked_against_levels(rx: GroupedRanks, ry: GroupedRanks):
    """The statistic ``clip counts -> ρ by group`` when y has few levels (a model's similarities
    against mean ratings), in half the passes over resamples × rows of :func:`_spearman_rows`.
    With W_g the group's weight, m = (W_g + 1)/2, a and b the midranks of x and y and w the row's
    weight, in x order:

    * Σ w (a − m)² = (W_g³ − W_g − Σ_t (W_t³ − W_t)) / 12 over x's tie blocks t (a row of weight w
      with untied x is a block of w copies) — the usual tie correction;
    * Σ w (a − m)(b − m) = Σ_L (b_L − m)(A_L − m W_L) over y's levels L, with A_L = Σ_{i∈L} w a
      read off :func:`_running_midranks` and W_L, b_L from the levels' weights;
    * Σ w (b − m)² = Σ_L W_L (b_L − m)².

    Every term is an integer or a multiple of ¼ (midranks are half-integers): while they stay
    below 2⁵¹ (~10⁵ rows a group) every sum is exact, so the result is :func:`_spearman_rows`'s
    bit for bit (the tests compare the two)."""
    y_level = ry.row_level[rx.order]  # each x-sorted row's y level
    by_level = np.argsort(y_level, kind="stable")
    level_starts = np.searchsorted(y_level[by_level], np.arange(len(ry.level_start)))
    lg, gs = ry.level_group, rx.group_start

    tie_starts = rx.first_level if rx.ties else gs  # where each group's tie levels begin

    def statistic(wc):
        ws = wc[:, rx.clip_sorted]
        r, w_group, before, w_tie = _running_midranks(ws, rx)
        w_level = np.add.reduceat(ws[:, by_level], level_starts, axis=1)
        a_sum = np.add.reduceat(r[:, by_level], level_starts, axis=1) - before[:, lg] * w_level
        b = ry._level_ranks(w_level)
        cubes = w_tie * w_tie
        cubes *= w_tie
        cubes -= w_tie
        wg = w_group.astype(np.int64)  # W³ in integers: exact beyond 2⁵³ too
        s_xx12 = (wg ** 3 - wg) - np.add.reduceat(cubes, tie_starts, axis=1).astype(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = (w_group * (w_group + 1) / 2 / w_group)[:, lg]
            db = b - m
            s_xy = np.add.reduceat(db * (a_sum - m * w_level), ry.first_level, axis=1)
            s_yy = np.add.reduceat(w_level * db * db, ry.first_level, axis=1)
            return s_xy / np.sqrt(s_xx12 / 12 * s_yy)

    return statistic


def _spearman_levels(rx: GroupedRanks, ry: GroupedRanks, clip: np.ndarray, n_clips: int):
    """The statistic ``clip counts -> ρ by group`` when both x and y have few levels (a rating
    against the mean of the others'): every sum is over (x level, y level) cells, whose weights are
    one product with a clips × cells table; the levels' and groups' weights are their sums. Exact,
    as :func:`_spearman_ranked_against_levels`."""
    ly = len(ry.level_start)
    cells, cell_of_row = np.unique(rx.row_level * ly + ry.row_level, return_inverse=True)
    cell_x, cell_y = cells // ly, cells % ly  # cells are ordered by x level, so by group
    cell_rows = _counts_by(clip, cell_of_row.ravel(), n_clips, len(cells))
    x_starts = np.searchsorted(cell_x, np.arange(len(rx.level_start)))
    by_y = np.argsort(cell_y, kind="stable")
    y_starts = np.searchsorted(cell_y[by_y], np.arange(ly))
    cell_starts = np.searchsorted(rx.level_group[cell_x], np.arange(len(rx.group_start)))

    def statistic(wc):
        n = cell_rows(wc)
        wx, wy = np.add.reduceat(n, x_starts, axis=1), np.add.reduceat(n[:, by_y], y_starts, axis=1)
        w_group = np.add.reduceat(wx, rx.first_level, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = w_group * (w_group + 1) / 2 / w_group
            da = rx._level_ranks(wx) - m[:, rx.level_group]
            db = ry._level_ranks(wy) - m[:, ry.level_group]
            s_xy = np.add.reduceat(n * da[:, cell_x] * db[:, cell_y], cell_starts, axis=1)
            s_xx = np.add.reduceat(wx * da * da, rx.first_level, axis=1)
            s_yy = np.add.reduceat(wy * db * db, ry.first_level, axis=1)
            return s_xy / np.sqrt(s_xx * s_yy)

    return statistic


def _spearman_rows(rx: GroupedRanks, ry: GroupedRanks, clip: np.ndarray, starts: np.ndarray, sizes: np.ndarray):
    """The statistic ``clip counts -> ρ by group`` for any x and y: the midranks of every row of
    every resample, and the weighted Pearson correlation of them, row by row."""

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

    return statistic


def spearman_statistic(x: np.ndarray, y: np.ndarray, clip: np.ndarray, code: np.ndarray, path: str | None = None):
    """``clip counts (resamples × clips) -> ρ (resamples × groups)`` for rows sorted by group
    ``code`` (0..G-1), clip codes ``clip``: the fastest of three computations of the same
    numbers — ``"levels"`` when x and y both have few levels, ``"ranked"`` when one of them has,
    else ``"rows"`` (``path`` forces one, for the tests)."""
    n_clips = int(clip.max()) + 1
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    sizes = np.diff(np.r_[starts, len(x)])
    rx, ry = GroupedRanks(x, code, clip), GroupedRanks(y, code, clip)
    if rx.level_weights is not None and ry.level_weights is None:  # ρ is symmetric: the few levels as y
        rx, ry = ry, rx
    few_x, few_y = rx.level_weights is not None, ry.level_weights is not None
    if path is None:
        path = "levels" if few_x and few_y else "ranked" if few_y else "rows"
    if path == "levels":
        return _spearman_levels(rx, ry, clip, n_clips)
    if path == "ranked":
        return _spearman_ranked_against_levels(rx, ry)
    return _spearman_rows(rx, ry, clip, starts, sizes)


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
    sizes = np.bincount(code)
    statistic = spearman_statistic(x, y, clip, code)
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
