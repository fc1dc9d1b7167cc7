"""Classification metrics of a model against the human majority (README: “3. benchmark.py”).

Every metric takes ``y_true`` (0/1 human majority) and ``y_pred`` (0/1 model decision), or
``scores`` (raw similarities) for the ranking metrics, validated once by :func:`check_binary`.
Undefined values are ``None`` (JSON null), never NaN and never a silent 0:

* accuracy = (tp + tn) / n; undefined when n = 0.
* recall (sensitivity) = tp / (tp + fn); undefined without positive truth.
* specificity = tn / (tn + fp); undefined without negative truth.
* balanced accuracy = (recall + specificity) / 2; undefined unless the truth has both classes
  (upstream writes NaN there); the human and sampling-prior figures use this one too.
* precision = tp / (tp + fp); undefined without positive predictions.
* F1 = 2·precision·recall / (precision + recall); undefined when either is undefined or both
  are 0 (this form, rather than 2tp/(2tp+fp+fn), reproduces upstream to the last bit).
* AUROC (Mann–Whitney, ties as midranks) and average precision (Σ (R_k − R_{k−1}) P_k over
  distinct thresholds) of the raw similarities; undefined unless the truth has both classes.

Every figure is computed with numpy from counts and ranks, and the shared tests check each one
against scikit-learn (``confusion_matrix``, ``balanced_accuracy_score``, ``roc_auc_score``,
``average_precision_score``) on random data with ties; scikit-learn is a test oracle, never
imported at run time.
* Quality band of balanced accuracy (upstream's, kept in summary.json as ``band``): < 0.55 Bad,
  < 0.65 Weak, < 0.75 Medium, < 0.85 Good, else Excellent. It ignores the interval and the
  humans, so a random scorer on a handful of rows can read "Good"; reports show the relative
  :func:`verdict` instead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .defaults import MIN_CLASS_ROWS
from .ranking import auroc
from .resampling import Bootstrap, detectable_difference, percentile_interval
from .summary import SliceRow

BANDS = ((0.55, "Bad"), (0.65, "Weak"), (0.75, "Medium"), (0.85, "Good"), (float("inf"), "Excellent"))


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
    values, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    # average precision over distinct thresholds, highest first
    pos_at = np.bincount(inverse, weights=t, minlength=len(values))[::-1]
    tp = np.cumsum(pos_at)
    predicted = np.cumsum(counts[::-1])
    precision = tp / predicted
    recall = tp / n_pos
    ap = float(np.sum(np.diff(np.concatenate([[0.0], recall])) * precision))
    return {"auroc": auroc(t, s), "average_precision": ap}


def ranking_metrics(y_true, scores) -> dict:
    """AUROC and average precision of raw scores; None unless both classes are present."""
    t, _, s = check_binary(y_true, scores=scores)
    return _ranking(t, s)


def balanced_accuracy_from_sums(tp, pos, tn, neg):
    """(tp / pos + tn / neg) / 2 elementwise; NaN where a class is absent (no warning)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (tp / pos + tn / neg) / 2


def confusion_counts(t: np.ndarray, p: np.ndarray) -> list[np.ndarray]:
    """Per row: [positive truth, true positive, negative truth, true negative] as 0/1 floats —
    the counts from which a resample's balanced accuracy is summed."""
    t, p = t.astype(np.float64), p.astype(np.float64)
    return [t, t * p, 1 - t, (1 - t) * (1 - p)]


def slice_intervals(t: np.ndarray, p: np.ndarray, clusters: np.ndarray, families: list[np.ndarray],
                    *, bootstrap: Bootstrap) -> list[list]:
    """95 % percentile bootstrap intervals of balanced accuracy for many slices from one set of
    clip resamples: all rows of one clip enter or leave a resample together.

    ``families`` holds, per slice family, each row's slice code (0..G-1, or -1 for rows in no
    slice of that family). Each draw resamples the clips once; every slice's statistic is
    computed on that same resample. Returns, per family, a list of intervals indexed by slice
    code: None for a slice whose rows lack a class; resamples lacking a class are dropped. Each
    interval comes with the 80 %-power minimum detectable difference of the slice
    (:func:`resampling.detectable_difference`): ``(interval, mde)``.
    """
    clip = pd.factorize(clusters, sort=True)[0] if len(clusters) else np.empty(0, np.int64)
    n_clips = int(clip.max()) + 1 if len(clip) else 0
    counts = confusion_counts(t, p)
    offsets, units, groups, values = [0], [], [], [[] for _ in counts]
    for codes in families:
        keep = codes >= 0
        units.append(clip[keep])
        groups.append(offsets[-1] + codes[keep])
        for acc, c in zip(values, counts, strict=True):
            acc.append(c[keep])
        offsets.append(offsets[-1] + (int(codes.max()) + 1 if len(codes) and codes.max() >= 0 else 0))
    n_slices = offsets[-1]
    out = [[None] * (offsets[i + 1] - offsets[i]) for i in range(len(families))]
    if n_clips == 0 or n_slices == 0:
        return out
    unit, group, values = np.concatenate(units), np.concatenate(groups), [np.concatenate(v) for v in values]
    # a slice whose data lack a class has no interval
    pos = np.bincount(group, weights=values[0], minlength=n_slices)
    neg = np.bincount(group, weights=values[2], minlength=n_slices)
    defined = (pos > 0) & (neg > 0)
    ba = bootstrap.grouped(lambda s: balanced_accuracy_from_sums(s[1], s[0], s[3], s[2]), unit=unit, group=group,
                           values=values, n_units=n_clips, n_groups=n_slices)
    for f in range(len(families)):
        for j in range(offsets[f + 1] - offsets[f]):
            k = offsets[f] + j
            out[f][j] = (percentile_interval(ba[:, k]), detectable_difference(ba[:, k])) if defined[k] else None
    return out


# ---------------------------------------------------------------------------------------------
# curves over thresholds (for the figures, and the reference-only best threshold)


def roc_points(truth: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) at every distinct threshold, from (0, 0) to (1, 1)."""
    order = np.argsort(-scores, kind="stable")
    s, t = scores[order], truth[order]
    last = np.r_[np.diff(s) != 0, True]  # the end of each group of tied scores
    tp = np.cumsum(t)[last]
    fp = np.cumsum(1 - t)[last]
    return np.r_[0.0, fp / max(fp[-1], 1)], np.r_[0.0, tp / max(tp[-1], 1)]


def threshold_sweep(truth: np.ndarray, scores: np.ndarray, n: int = 201) -> tuple[np.ndarray, np.ndarray]:
    """Balanced accuracy of ``score >= threshold`` over a grid of thresholds spanning the scores."""
    grid = np.linspace(scores.min(), scores.max(), n) if len(scores) else np.empty(0)
    pos, neg = truth.sum(), len(truth) - truth.sum()
    s_pos, s_neg = np.sort(scores[truth == 1]), np.sort(scores[truth == 0])
    tpr = (pos - np.searchsorted(s_pos, grid, side="left")) / pos if pos else np.full(len(grid), np.nan)
    tnr = np.searchsorted(s_neg, grid, side="left") / neg if neg else np.full(len(grid), np.nan)
    return grid, (tpr + tnr) / 2


def best_threshold(truth: np.ndarray, scores: np.ndarray) -> dict:
    """The threshold (among the scores themselves) with the highest balanced accuracy.
    Reported for reference only; the run's threshold is never changed by it."""
    if len(scores) == 0 or truth.min() == truth.max():
        return {"threshold": None, "balanced_accuracy": None}
    cand = np.unique(scores)
    pos, neg = truth.sum(), len(truth) - truth.sum()
    tpr = (pos - np.searchsorted(np.sort(scores[truth == 1]), cand, side="left")) / pos
    tnr = np.searchsorted(np.sort(scores[truth == 0]), cand, side="left") / neg
    ba = (tpr + tnr) / 2
    i = int(np.argmax(ba))  # first maximum: the lowest threshold among equals
    return {"threshold": float(cand[i]), "balanced_accuracy": float(ba[i])}


def band(balanced_accuracy: float | None) -> str:
    if balanced_accuracy is None:
        return "n/a"
    return next(name for limit, name in BANDS if balanced_accuracy < limit)


def verdict(value: float | None, ci, *, enough: bool = True, human: float | None = None) -> str:
    """How a balanced accuracy or AUROC reads, relative to chance (0.5 for both) and to the
    human reference ``human`` (a human's balanced accuracy on the same kind of target; None when
    there is none worth comparing with):

    * ``"n/a"`` without a value; ``"too few rows of a class"`` when ``enough`` is false (the
      minority class has fewer than ``--min-class-rows`` rows) or there is no interval;
    * ``"indistinguishable from chance"`` when the 95 % interval includes 0.5,
      ``"below chance"`` when it lies below;
    * above chance: ``"above chance"``, followed by ``", below the humans (h)"`` when the
      interval lies below h, ``", level with the humans (h)"`` when it includes h and
      ``", above the humans (h)"`` when it lies above.

    Never better than "indistinguishable from chance" while the interval includes 0.5."""
    if value is None:
        return "n/a"
    if not enough or ci is None:
        return "too few rows of a class"
    lo, hi = ci
    if lo <= 0.5 <= hi:
        return "indistinguishable from chance"
    if hi < 0.5:
        return "below chance"
    if human is None:
        return "above chance"
    side = "below" if hi < human else "above" if lo > human else "level with"
    return f"above chance, {side} the humans ({human:.3f})"


SLICE_COLUMNS = ["n", "accuracy", "balanced_accuracy", "f1", "precision", "recall", "specificity", "auroc",
                 "average_precision", "balanced_accuracy_ci_low", "balanced_accuracy_ci_high", "tp", "fp", "tn", "fn",
                 "n_positive", "n_negative", "balanced_accuracy_p_chance", "balanced_accuracy_q_bh",
                 "balanced_accuracy_mde80"]
# MIN_CLASS_ROWS: a slice whose minority class has fewer rows gets no balanced-accuracy interval
# (benchmark.py --min-class-rows): with two negatives, recall on the negatives is 0, 0.5 or 1, and a
# percentile interval over resamples of them only looks confident.


def metrics_of(t: np.ndarray, p: np.ndarray, s: np.ndarray, resampled, min_class_rows: int = MIN_CLASS_ROWS) -> SliceRow:
    """Every metric of one slice, with ``n_positive`` / ``n_negative`` (rows of each true
    class); ``resampled``: ``(interval, mde)`` of :func:`slice_intervals`, or None. The
    balanced-accuracy interval, the p of "differs from chance" and the MDE are None when the
    minority class has fewer than ``min_class_rows`` rows (the point value is kept).

    The p: balanced accuracy is 0.5 exactly when the decisions are independent of the truth
    (recall = 1 − specificity), so "differs from chance" is Fisher's exact test of independence
    on the slice's 2×2 table (two-sided, scipy). Rows are its units: within one slice a clip
    carries one row (one item per clip and emotion, task type, dimension or polarity). Exact and
    conservative, its p-values keep the Benjamini–Hochberg adjustment honest; the clip-bootstrap
    p did not (bench/fdr_slices.py: 12 % false discoveries at a nominal 5 %)."""
    from scipy.stats import fisher_exact

    n_positive, n_negative = float(t.sum()), float(len(t) - t.sum())
    if min(n_positive, n_negative) < min_class_rows:
        resampled = None
    interval, mde = resampled if resampled else (None, None)
    m = binary_metrics(t, p)
    p_chance = None
    if resampled:
        p_chance = float(fisher_exact([[m["tp"], m["fn"]], [m["fp"], m["tn"]]], alternative="two-sided").pvalue)
    return SliceRow(**m, **_ranking(t, s), n_positive=n_positive, n_negative=n_negative,
                    ci95=interval or None, balanced_accuracy_p_chance=p_chance, balanced_accuracy_mde80=mde)


def bh_q_values(p_values) -> list[float | None]:
    """Benjamini–Hochberg q-values of the p-values given (None stays None, and is not counted)."""
    from scipy.stats import false_discovery_control

    defined = [i for i, v in enumerate(p_values) if v is not None]
    out: list[float | None] = [None] * len(p_values)
    if defined:
        for i, q in zip(defined, false_discovery_control([p_values[i] for i in defined], method="bh"), strict=True):
            out[i] = float(q)
    return out


def slice_report(frame: pd.DataFrame, keys: list[str], *, bootstrap: Bootstrap,
                 min_class_rows: int = MIN_CLASS_ROWS) -> tuple[SliceRow, SliceRow, dict[str, pd.DataFrame]]:
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
    intervals = slice_intervals(t, p, frame["clip"].to_numpy(), families, bootstrap=bootstrap) if n else [[None], [None]] + [[] for _ in keys]
    overall = metrics_of(t, p, s, intervals[0][0] if intervals[0] else None, min_class_rows)
    unan = metrics_of(t[unanimous], p[unanimous], s[unanimous], intervals[1][0] if intervals[1] else None, min_class_rows)
    tables = {}
    for key, c, values, ivs in zip(keys, codes, labels, intervals[2:], strict=True):
        rows = []
        for j, value in enumerate(values):
            sel = c == j
            rows.append({key: value, **metrics_of(t[sel], p[sel], s[sel], ivs[j], min_class_rows).record()})
        # multiplicity: "differs from chance" over the slices of this table
        for row, q in zip(rows, bh_q_values([r["balanced_accuracy_p_chance"] for r in rows]), strict=True):
            row["balanced_accuracy_q_bh"] = q
        tables[key] = pd.DataFrame(rows, columns=[key, *SLICE_COLUMNS])
    return overall, unan, tables
