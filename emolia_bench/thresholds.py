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
the lowest wins (:func:`metrics.best_threshold`). A fold whose training rows lack a class uses
the run's fixed threshold. The balanced accuracy of the assembled out-of-fold decisions is
reported with its clip-bootstrap interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import best_threshold


def clip_folds(clips: np.ndarray, k: int, *, seed: int) -> np.ndarray:
    """Each row's fold 0..k-1: the distinct clips (sorted) are shuffled with ``seed`` and dealt
    out in turn, so every row of a clip lands in the same fold and folds differ by at most one
    clip."""
    codes, uniq = pd.factorize(pd.Series(clips).astype(str), sort=True)
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of_clip = np.empty(len(uniq), dtype=np.int64)
    fold_of_clip[order] = np.arange(len(uniq)) % k
    return fold_of_clip[codes]


def cv_thresholds(truth: np.ndarray, scores: np.ndarray, folds: np.ndarray, fallback: float,
                  groups: np.ndarray | None = None) -> np.ndarray:
    """The threshold applied to each row: chosen on the rows of the other folds only (globally,
    or within the row's group when ``groups`` is given; see the module docstring)."""
    truth, scores = np.asarray(truth, dtype=np.int64), np.asarray(scores, dtype=np.float64)
    applied = np.full(len(truth), float(fallback))
    fold_threshold = {}
    for f in np.unique(folds):
        best = best_threshold(truth[folds != f], scores[folds != f])["threshold"]
        fold_threshold[f] = float(fallback) if best is None else best
        applied[folds == f] = fold_threshold[f]
    if groups is None:
        return applied
    codes = pd.factorize(pd.Series(groups))[0]
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    for rows in np.split(order, starts[1:]):  # the rows of one group
        for f in np.unique(folds[rows]):
            train, test = rows[folds[rows] != f], rows[folds[rows] == f]
            best = best_threshold(truth[train], scores[train])["threshold"] if len(train) else None
            if best is not None:
                applied[test] = best
    return applied
