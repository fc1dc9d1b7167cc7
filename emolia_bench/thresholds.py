"""Cross-validated decision thresholds: a threshold is only ever applied to rows it never saw.

A fixed threshold (``--threshold``, 0.0 as upstream) can mean "everything present" for a real
CLAP model, whose cosines are almost all positive; the best threshold chosen on the rows it is
then scored on overstates the model. Here the clips are split into ``k`` folds (seeded, every
row of a clip in one fold); for each fold, the threshold that maximises balanced accuracy on
the *other* folds is applied to it:

* ``global``: one threshold for all rows;
* ``per_prompt``: one threshold per prompt (queried emotion / dimension level), since
  similarity scales differ by prompt; a prompt whose training rows lack a class uses that
  fold's global threshold.

The candidate thresholds are the training scores themselves; among equal balanced accuracies
the lowest wins (the rule of :func:`metrics.best_threshold`). A fold whose training rows lack a
class uses the run's fixed threshold. The figure is the balanced accuracy of the assembled
out-of-fold decisions; undefined unless the scored rows hold both classes.

Its interval re-runs the whole procedure — threshold choice included — on every clip resample
(:func:`cv_balanced_accuracy`). Holding the chosen thresholds fixed and resampling only the
decisions ignores that the choice itself moves the pooled figure, and such an interval covered
a pure-noise scorer's 0.5 in only 65–88 % of simulated runs; ``bench/coverage_cv.py``
measures the coverage of this one. In a resample the folds stay those of the clips (a clip drawn
twice lands twice in its own fold), and a threshold is chosen among the scores of the rows
drawn, exactly as on data that held those rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .resampling import Bootstrap


def clip_folds(clips: np.ndarray, k: int, *, seed: int) -> np.ndarray:
    """Each row's fold 0..k-1: the distinct clips (sorted) are shuffled with ``seed`` and dealt
    out in turn, so every row of a clip lands in the same fold and folds differ by at most one
    clip."""
    codes, uniq = pd.factorize(pd.Series(clips).astype(str), sort=True)
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of_clip = np.empty(len(uniq), dtype=np.int64)
    fold_of_clip[order] = np.arange(len(uniq)) % k
    return fold_of_clip[codes]


class Candidates:
    """The candidate thresholds of some training rows, per group: the rows sorted by (group,
    score), cut into one segment per distinct score within a group. Built once from the data;
    :meth:`best` then chooses for any number of resamples at once."""

    def __init__(self, truth: np.ndarray, scores: np.ndarray, codes: np.ndarray, n_groups: int):
        self.order = np.lexsort((scores, codes))
        self.n_groups = n_groups
        if len(self.order) == 0:  # no training rows (a run of fewer clips than folds): no candidate
            return
        s, g = scores[self.order], codes[self.order]
        self.truth = truth[self.order]
        new_group = np.r_[True, g[1:] != g[:-1]]
        self.segments = np.flatnonzero(new_group | np.r_[True, s[1:] != s[:-1]])  # first row of each segment
        self.score = s[self.segments]
        self.group_start = np.flatnonzero(new_group[self.segments])  # first segment of each group present
        self.group = g[self.segments][self.group_start]

    def best(self, weights: np.ndarray) -> np.ndarray:
        """Per resample (rows of ``weights``: how often each training row was drawn) and group,
        the score with the highest balanced accuracy of ``score >= threshold`` among the scores of
        the group's rows drawn (the lowest among equals); NaN where those rows lack a class. At
        weight 1 this is :func:`metrics.best_threshold` within each group."""
        out = np.full((len(weights), self.n_groups), np.nan)
        if len(self.order) == 0:
            return out
        w = weights[:, self.order]
        drawn = np.add.reduceat(w, self.segments, axis=1)
        pos = np.add.reduceat(w * self.truth, self.segments, axis=1)
        neg = drawn - pos
        # per group: its positives and negatives, and how many lie below each candidate
        starts = self.group_start
        sizes = np.diff(np.r_[starts, len(self.segments)])
        n_pos = np.repeat(np.add.reduceat(pos, starts, axis=1), sizes, axis=1)
        n_neg = np.repeat(np.add.reduceat(neg, starts, axis=1), sizes, axis=1)
        cum_pos, cum_neg = np.cumsum(pos, axis=1) - pos, np.cumsum(neg, axis=1) - neg  # below, over all groups
        below_pos = cum_pos - np.repeat(cum_pos[:, starts], sizes, axis=1)
        below_neg = cum_neg - np.repeat(cum_neg[:, starts], sizes, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            # rows at or above a candidate are called present
            ba = ((n_pos - below_pos) / n_pos + below_neg / n_neg) / 2
        ba[drawn == 0] = -np.inf  # a score no drawn row has is no candidate
        top = np.repeat(np.maximum.reduceat(ba, starts, axis=1), sizes, axis=1)
        position = np.where(ba == top, np.arange(len(self.segments)), len(self.segments))
        first = np.minimum.reduceat(position, starts, axis=1)  # the lowest candidate among equals
        chosen = self.score[np.minimum(first, len(self.segments) - 1)]
        undefined = (n_pos[:, starts] == 0) | (n_neg[:, starts] == 0)
        out[:, self.group] = np.where(undefined, np.nan, chosen)
        return out


def cv_plan(truth: np.ndarray, scores: np.ndarray, folds: np.ndarray, groups: np.ndarray | None):
    """The candidates of every fold's training rows, globally and (with ``groups``) per group."""
    truth, scores = np.asarray(truth, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    codes = pd.factorize(pd.Series(groups))[0] if groups is not None else None
    plan = []
    for f in np.unique(folds):
        train, test = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
        whole = Candidates(truth[train], scores[train], np.zeros(len(train), np.int64), 1)
        per_group = None if codes is None else Candidates(truth[train], scores[train], codes[train], int(codes.max()) + 1)
        plan.append((train, test, whole, per_group, None if codes is None else codes[test]))
    return plan


def cv_applied(plan, fallback: float, weights: np.ndarray) -> np.ndarray:
    """The threshold applied to each row (columns) in each resample (rows of ``weights``):
    chosen on the rows of the other folds only, globally or within the row's group (see the
    module docstring)."""
    applied = np.empty(weights.shape)
    for train, test, whole, per_group, test_codes in plan:
        glob = whole.best(weights[:, train])[:, 0]
        glob = np.where(np.isnan(glob), float(fallback), glob)
        if per_group is None:
            applied[:, test] = glob[:, None]
        else:  # a group whose training rows lack a class: the fold's global threshold
            mine = per_group.best(weights[:, train])[:, test_codes]
            applied[:, test] = np.where(np.isnan(mine), glob[:, None], mine)
    return applied


def cv_thresholds(truth: np.ndarray, scores: np.ndarray, folds: np.ndarray, fallback: float,
                  groups: np.ndarray | None = None) -> np.ndarray:
    """The threshold applied to each row of the data (every row once)."""
    return cv_applied(cv_plan(truth, scores, folds, groups), fallback, np.ones((1, len(truth))))[0]


def cv_balanced_accuracy(truth: np.ndarray, scores: np.ndarray, clips: np.ndarray, folds: np.ndarray,
                         fallback: float, groups: np.ndarray | None, *,
                         bootstrap: Bootstrap) -> tuple[float | None, np.ndarray, np.ndarray]:
    """(balanced accuracy of the out-of-fold decisions, the same with the whole cross-validation
    re-run on every clip resample — NaN where a resample lacks a class —, the thresholds applied
    to the data's rows). The figure is None unless the rows hold both classes (and then no
    resample is drawn)."""
    truth = np.asarray(truth, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    applied = cv_thresholds(truth, scores, folds, fallback, groups)
    if len(truth) == 0 or truth.min() == truth.max():
        return None, np.empty(0), applied
    clip = pd.factorize(pd.Series(clips).astype(str), sort=True)[0]
    plan = cv_plan(truth, scores, folds, groups)

    def statistic(w_clips: np.ndarray) -> np.ndarray:
        w = w_clips[:, clip]  # how often each row was drawn
        called = scores >= cv_applied(plan, fallback, w)
        pos, neg = w @ truth, w @ (1 - truth)
        with np.errstate(invalid="ignore", divide="ignore"):
            return ((w * called) @ truth / pos + (w * ~called) @ (1 - truth) / neg) / 2

    called = scores >= applied
    point = (float(called[truth == 1].mean()) + float((~called[truth == 0]).mean())) / 2
    return point, bootstrap.map(statistic, int(clip.max()) + 1, cells_per_resample=len(truth)), applied
