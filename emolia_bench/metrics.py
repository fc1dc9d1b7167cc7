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
* AUROC and average precision of the raw similarities (scikit-learn); undefined unless the
  truth has both classes.
* Quality band of balanced accuracy: < 0.55 Bad, < 0.65 Weak, < 0.75 Medium, < 0.85 Good,
  else Excellent.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .defaults import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED
from .resampling import bootstrap_sums, percentile_interval

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
    """(tp, fp, tn, fn) via scikit-learn's confusion matrix with both labels fixed."""
    t, p, _ = check_binary(y_true, y_pred)
    if len(t) == 0:
        return 0, 0, 0, 0
    from sklearn.metrics import confusion_matrix

    (tn, fp), (fn, tp) = confusion_matrix(t, p, labels=[0, 1])
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


def ranking_metrics(y_true, scores) -> dict:
    """AUROC and average precision of raw scores; None unless both classes are present."""
    t, _, s = check_binary(y_true, scores=scores)
    if len(t) == 0 or t.min() == t.max():
        return {"auroc": None, "average_precision": None}
    from sklearn.metrics import average_precision_score, roc_auc_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"auroc": float(roc_auc_score(t, s)), "average_precision": float(average_precision_score(t, s))}


def balanced_accuracy_interval(y_true, y_pred, clusters, seed: int = METRIC_SEED,
                               draws: int = METRIC_DRAWS) -> list[float] | None:
    """95 % percentile bootstrap interval of balanced accuracy, resampling clusters (clips):
    all rows of one clip enter or leave a resample together. Draws where the resample lacks a
    class are dropped; None when no draw is defined."""
    t, p, _ = check_binary(y_true, y_pred)
    if len(t) == 0 or t.min() == t.max():
        return None
    codes = pd.factorize(np.asarray(clusters), sort=True)[0]
    n = codes.max() + 1
    # per clip: positives, true positives, negatives, true negatives
    per_clip = np.zeros((n, 4))
    np.add.at(per_clip, codes, np.column_stack([t, t * p, 1 - t, (1 - t) * (1 - p)]))
    stats = []
    for (s,) in bootstrap_sums([per_clip], draws, seed):
        with np.errstate(invalid="ignore", divide="ignore"):
            stats.append((s[:, 1] / s[:, 0] + s[:, 3] / s[:, 2]) / 2)
    return percentile_interval(np.concatenate(stats))


def band(balanced_accuracy: float | None) -> str:
    if balanced_accuracy is None:
        return "n/a"
    return next(name for limit, name in BANDS if balanced_accuracy < limit)


def slice_metrics(frame: pd.DataFrame, key: str, seed: int = METRIC_SEED, draws: int = METRIC_DRAWS,
                  with_interval: bool = True) -> pd.DataFrame:
    """Metrics per value of ``key`` (sorted ascending) over rows with ``majority_present``,
    ``pred_present``, ``similarity`` and ``clip``. Columns: the key, then
    n, accuracy, balanced_accuracy, f1, then our extras."""
    rows = []
    for value, g in frame.groupby(key, sort=True):
        rows.append({key: value, **row_metrics(g, seed, draws, with_interval)})
    cols = [key, "n", "accuracy", "balanced_accuracy", "f1", "precision", "recall", "specificity", "auroc",
            "average_precision", "balanced_accuracy_ci_low", "balanced_accuracy_ci_high", "tp", "fp", "tn", "fn"]
    return pd.DataFrame(rows, columns=cols)


def row_metrics(g: pd.DataFrame, seed: int = METRIC_SEED, draws: int = METRIC_DRAWS, with_interval: bool = True) -> dict:
    t = g["majority_present"].to_numpy()
    p = g["pred_present"].to_numpy()
    m = binary_metrics(t, p)
    m.update(ranking_metrics(t, g["similarity"].to_numpy()))
    ci = balanced_accuracy_interval(t, p, g["clip"].to_numpy(), seed, draws) if with_interval else None
    m["balanced_accuracy_ci_low"], m["balanced_accuracy_ci_high"] = ci if ci else (None, None)
    return m
