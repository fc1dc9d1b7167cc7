"""Classification metrics of a model against the human majority (SPEC §4.4).

Every metric takes ``y_true`` (0/1 human majority) and ``y_pred`` (0/1 model decision), or
``scores`` (raw similarities) for the ranking metrics, validated once by :func:`check_binary`.
Undefined values are ``None`` (JSON null), never NaN and never a silent 0:

* accuracy = (tp + tn) / n; undefined when n = 0.
* recall (sensitivity) = tp / (tp + fn); undefined without positive truth.
* specificity = tn / (tn + fp); undefined without negative truth.
* balanced accuracy = (recall + specificity) / 2; undefined unless the truth has both classes.
* precision = tp / (tp + fp); undefined without positive predictions.
* F1 = 2·precision·recall / (precision + recall); undefined when either is undefined or both
  are 0 (this form, rather than 2tp/(2tp+fp+fn), reproduces upstream to the last bit).
* AUROC (Mann–Whitney, ties as midranks) and average precision (Σ (R_k − R_{k−1}) P_k over
  distinct thresholds) of the raw similarities; undefined unless the truth has both classes.

Every figure is computed with numpy from counts and ranks, and the shared tests check each one
against scikit-learn (``confusion_matrix``, ``balanced_accuracy_score``, ``roc_auc_score``,
``average_precision_score``) on random data with ties. Importing scikit-learn alone takes
0.8 s on the 2-core machines this runs on, more than half the 1.5 s budget of a sham run.
* Quality band of balanced accuracy: < 0.55 Bad, < 0.65 Weak, < 0.75 Medium, < 0.85 Good,
  else Excellent.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .defaults import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED
from .resampling import bootstrap_weights, percentile_interval

BANDS = ((0.55, "Bad"), (0.65, "Weak"), (0.75, "Medium"), (0.85, "Good"), (float("inf"), "Excellent"))
METRIC_SEED, METRIC_DRAWS = BOOTSTRAP_SEED, BOOTSTRAP_DRAWS


def check_binary(y_true, y_pred=None, scores=None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The one validator: 1-D, equal lengths, labels in {0, 1}, finite scores."""
    t = np.asarray(y_true)
    if t.ndim != 1:
        raise ValueError("y_true must be 1-D")
    if len(t) and not np.isin(t, (0, 1)).all():
        raise ValueError("y_true must contain only 0 and 1")
    t = t.astype(np.int64)
    p = s = None
    if y_pred is not None:
        p = np.asarray(y_pred)
        if p.shape != t.shape:
            raise ValueError(f"y_pred has shape {p.shape}, y_true {t.shape}")
        if len(p) and not np.isin(p, (0, 1)).all():
            raise ValueError("y_pred must contain only 0 and 1")
        p = p.astype(np.int64)
    if scores is not None:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != t.shape:
            raise ValueError(f"scores has shape {s.shape}, y_true {t.shape}")
        if not np.isfinite(s).all():
            raise ValueError("scores must be finite")
    return t, p, s


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def confusion(y_true, y_pred) -> tuple[int, int, int, int]:
    """(tp, fp, tn, fn)."""
    t, p, _ = check_binary(y_true, y_pred)
    tn, fp, fn, tp = np.bincount(t * 2 + p, minlength=4)
    return int(tp), int(fp), int(tn), int(fn)


def binary_metrics(y_true, y_pred) -> dict:
    """n, accuracy, balanced_accuracy, precision, recall, f1, tp, fp, tn, fn, specificity.

    Counts are floats, as upstream writes them (``"n": 8.0``).
    """
    tp, fp, tn, fn = confusion(y_true, y_pred)
    n = tp + fp + tn + fn
    recall = _ratio(tp, tp + fn)
    specificity = _ratio(tn, tn + fp)
    precision = _ratio(tp, tp + fp)
    bal = (recall + specificity) / 2 if recall is not None and specificity is not None else None
    f1 = None
    if precision is not None and recall is not None and precision + recall > 0:
        f1 = 2 * precision * recall / (precision + recall)
    return {
        "n": float(n),
        "accuracy": _ratio(tp + tn, n),
        "balanced_accuracy": bal,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tp": float(tp),
        "fp": float(fp),
        "tn": float(tn),
        "fn": float(fn),
        "specificity": specificity,
    }


def _ranking(t: np.ndarray, s: np.ndarray) -> dict:
    n_pos = int(t.sum())
    n_neg = len(t) - n_pos
    if n_pos == 0 or n_neg == 0:
        return {"auroc": None, "average_precision": None}
    # midranks: tied scores share the mean of the ranks they span
    values, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    midrank = ends - (counts - 1) / 2.0
    auroc = (midrank[inverse][t == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
    # average precision over distinct thresholds, highest first
    pos_at = np.bincount(inverse, weights=t, minlength=len(values))[::-1]
    tp = np.cumsum(pos_at)
    predicted = np.cumsum(counts[::-1])
    precision = tp / predicted
    recall = tp / n_pos
    ap = float(np.sum(np.diff(np.concatenate([[0.0], recall])) * precision))
    return {"auroc": float(auroc), "average_precision": ap}


def ranking_metrics(y_true, scores) -> dict:
    """AUROC and average precision of raw scores; None unless both classes are present."""
    t, _, s = check_binary(y_true, scores=scores)
    return _ranking(t, s)


def balanced_accuracy_interval(y_true, y_pred, clusters, seed: int = METRIC_SEED,
                               draws: int = METRIC_DRAWS) -> list[float] | None:
    """95 % percentile bootstrap interval of balanced accuracy, resampling clusters (clips):
    all rows of one clip enter or leave a resample together. Draws where the resample lacks a
    class are dropped; None when the data lack a class or no draw is defined."""
    t, p, _ = check_binary(y_true, y_pred)
    groups = np.zeros(len(t), dtype=np.int64)
    return slice_intervals(t, p, np.asarray(clusters), [groups], seed, draws)[0][0]


def slice_intervals(t: np.ndarray, p: np.ndarray, clusters: np.ndarray, families: list[np.ndarray],
                    seed: int = METRIC_SEED, draws: int = METRIC_DRAWS) -> list[list]:
    """Balanced-accuracy intervals for many slices from one set of clip resamples.

    ``families`` holds, per slice family, each row's slice code (0..G-1, or -1 for rows in no
    slice of that family). Each draw resamples the clips once; every slice's statistic is
    computed on that same resample, so the cost is one resampling per subset, not one per
    slice. Returns, per family, a list of intervals indexed by slice code.
    """
    from .lazy_imports import spare_unused_modules

    spare_unused_modules()  # scipy.sparse pulls in numpy.f2py and numpy.testing otherwise
    from scipy import sparse

    clip = pd.factorize(clusters, sort=True)[0] if len(clusters) else np.empty(0, np.int64)
    n_clips = int(clip.max()) + 1 if len(clip) else 0
    offsets, cols, rows_, vals = [0], [], [], []
    stats = np.column_stack([t, t * p, 1 - t, (1 - t) * (1 - p)]).astype(np.float64)
    for codes in families:
        g = int(codes.max()) + 1 if len(codes) and codes.max() >= 0 else 0
        keep = codes >= 0
        for k in range(4):
            nz = keep & (stats[:, k] > 0)
            rows_.append(clip[nz])
            cols.append((offsets[-1] + codes[nz]) * 4 + k)
            vals.append(stats[nz, k])
        offsets.append(offsets[-1] + g)
    n_slices = offsets[-1]
    out = [[None] * (offsets[i + 1] - offsets[i]) for i in range(len(families))]
    if n_clips == 0 or n_slices == 0:
        return out
    m = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows_), np.concatenate(cols))),
                          shape=(n_clips, n_slices * 4))
    # a slice whose data lack a class has no interval
    totals = np.asarray(m.sum(axis=0)).reshape(n_slices, 4)
    defined = (totals[:, 0] > 0) & (totals[:, 2] > 0)
    # Clips with identical rows of m (same slices, same outcomes: most single-row clips) are
    # interchangeable, so each resample's sums only need how often each kind of clip was drawn:
    # the same resamples, a much smaller product.
    clip_type, representative = identical_rows(m)
    m_types = m[representative]
    draws_ba = []
    for w in bootstrap_weights(n_clips, draws, seed, unit_type=clip_type):
        s = np.asarray((m_types.T @ w.T).T).reshape(len(w), n_slices, 4)
        with np.errstate(invalid="ignore", divide="ignore"):
            draws_ba.append((s[:, :, 1] / s[:, :, 0] + s[:, :, 3] / s[:, :, 2]) / 2)
    ba = np.concatenate(draws_ba)
    for f in range(len(families)):
        for j in range(offsets[f + 1] - offsets[f]):
            k = offsets[f] + j
            out[f][j] = percentile_interval(ba[:, k]) if defined[k] else None
    return out


def identical_rows(m) -> tuple[np.ndarray, np.ndarray]:
    """``(row_type, representative)`` of a scipy-sparse matrix: rows with the same entries share
    a type (0..T-1, in order of first appearance), and ``representative[t]`` is the first row of
    type t. Exact: equal hashes are confirmed by comparing the rows' bytes."""
    m = m.tocsr()
    m.sum_duplicates()
    m.sort_indices()
    per_row = np.diff(m.indptr)
    width = int(per_row.max()) if len(per_row) else 0
    rows = np.repeat(np.arange(m.shape[0]), per_row)
    at = np.arange(m.nnz) - np.repeat(m.indptr[:-1], per_row)  # position of each entry in its row
    entries = np.full((m.shape[0], 1 + 2 * width), -1.0)  # count, column indices, values
    entries[:, 0] = per_row
    entries[rows, 1 + at] = m.indices
    entries[rows, 1 + width + at] = m.data
    # each row's entries as one bytes value; pandas hashes them (and compares on collision)
    keys = entries.view(np.dtype((np.void, entries.shape[1] * 8))).ravel().astype(object)
    row_type, kinds = pd.factorize(keys)
    representative = np.empty(len(kinds), dtype=np.int64)
    representative[row_type[::-1]] = np.arange(len(row_type))[::-1]  # the first row of each type
    return row_type.astype(np.int64), representative


def band(balanced_accuracy: float | None) -> str:
    if balanced_accuracy is None:
        return "n/a"
    return next(name for limit, name in BANDS if balanced_accuracy < limit)


SLICE_COLUMNS = ["n", "accuracy", "balanced_accuracy", "f1", "precision", "recall", "specificity", "auroc",
                 "average_precision", "balanced_accuracy_ci_low", "balanced_accuracy_ci_high", "tp", "fp", "tn", "fn"]


def metrics_of(t: np.ndarray, p: np.ndarray, s: np.ndarray, interval) -> dict:
    m = binary_metrics(t, p)
    m.update(_ranking(t, s))
    m["balanced_accuracy_ci_low"], m["balanced_accuracy_ci_high"] = interval if interval else (None, None)
    return m


def slice_report(frame: pd.DataFrame, keys: list[str], seed: int = METRIC_SEED, draws: int = METRIC_DRAWS
                 ) -> tuple[dict, dict, dict[str, pd.DataFrame]]:
    """Overall metrics, unanimous-subset metrics and one table per key of ``keys``.

    ``frame`` has ``majority_present``, ``pred_present``, ``similarity``, ``clip``,
    ``all_agree_binary`` and the key columns. Tables list the key's values in ascending order
    with ``n, accuracy, balanced_accuracy, f1`` first, then the extras. All intervals come from
    one set of clip resamples.
    """
    t, p, s = check_binary(frame["majority_present"].to_numpy(), frame["pred_present"].to_numpy(),
                           frame["similarity"].to_numpy())
    n = len(t)
    unanimous = frame["all_agree_binary"].to_numpy(dtype=bool)
    codes, labels = [], []
    for key in keys:
        c, u = pd.factorize(frame[key], sort=True)
        codes.append(c.astype(np.int64))
        labels.append(list(u))
    families = [np.zeros(n, np.int64), np.where(unanimous, 0, -1).astype(np.int64), *codes]
    intervals = slice_intervals(t, p, frame["clip"].to_numpy(), families, seed, draws) if n else [[None], [None]] + [[] for _ in keys]
    overall = metrics_of(t, p, s, intervals[0][0] if intervals[0] else None)
    unan = metrics_of(t[unanimous], p[unanimous], s[unanimous], intervals[1][0] if intervals[1] else None)
    tables = {}
    for key, c, values, ivs in zip(keys, codes, labels, intervals[2:], strict=True):
        rows = []
        for j, value in enumerate(values):
            sel = c == j
            rows.append({key: value, **metrics_of(t[sel], p[sel], s[sel], ivs[j])})
        tables[key] = pd.DataFrame(rows, columns=[key, *SLICE_COLUMNS])
    return overall, unan, tables
