"""Soft labels: the model scored against each item's vote fraction, not only its majority
(``summary.json["soft_labels"]``, ``calibration.csv``, ``reliability.png``).

A majority of two or three noisy votes hides how sure the humans were: 2 of 3 and 3 of 3 are
both "present", a 1–1 split becomes "absent" by upstream's tie rule. Here every scored item
keeps its **vote fraction** q — the share of its raters whose binary vote is "present" — and,
where analysis.py fitted it, the Dawid–Skene posterior probability of "present"
(rater_models.csv).

**The model's probability** p of "present": σ(similarity) when the similarity is a logit
(``--similarity logit``: the model's own calibrated scale); otherwise a **cross-validated Platt
map** p = σ(a·similarity + b), fitted by maximum likelihood against the vote fractions (soft
cross-entropy) on the other folds' clips — the clip folds of the cross-validated thresholds, so
no item's probability comes from a map that saw it. The sampling prior gets the same map with
its decision (±1) as the score, which makes its probability the share of "present" votes
among the other folds' items of its group.

Figures, each a mean over the scored items (each item once):

* **Brier score** = mean (p − y)², y the vote fraction (or the DS posterior); 0 is perfect;
* **Jensen–Shannon divergence** = mean JS(Bernoulli(p) ‖ Bernoulli(y)) in bits (0…1), with
  JS(P‖Q) = H(M) − (H(P) + H(Q))/2, M = (P + Q)/2, H the binary entropy and 0·log 0 = 0;
* **expected calibration error** = Σ_b (n_b / n) |mean_b p − mean_b y| over 10 equal-width bins
  of p ([0, 0.1), …, [0.9, 1.0]), y the vote fraction or the 0/1 majority; the per-bin means are
  the reliability diagram;
* **soft AUROC** = the AUROC of the similarity with each item counted as a positive of weight q
  and a negative of weight 1 − q (the duplicated-row construction; the item against itself is a
  tie worth ½), pooled and macro-averaged over categories (:mod:`ranking`; monotone maps do not
  change it, so it reads the similarity itself).

Undefined cases: no scored item with a vote gives None for all; the soft AUROC is None where
the positives' or the negatives' weight is 0 (every q is 0, or every q is 1); a Dawid–Skene
figure is None without rater_models.csv. Intervals: clip bootstrap, 95 % percentile, and the
Platt map is re-fitted on the other folds' clips drawn in every resample (as the thresholds
are re-chosen), so the interval carries the map's own uncertainty.

The hard figures read the majority: an item whose raters split evenly counts as "absent" there,
and an item with one rater carries that rater's vote as its label; the soft figures keep both
at their vote fraction (``items_tied``, ``items_one_rater`` say how many).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from .ranking import auroc_with_intervals
from .resampling import Bootstrap, percentile_interval
from .vs_humans import votes_of_scored

BINS = 10
NEWTON_STEPS = 50
# a Platt fit on separable training rows runs to infinity; this keeps σ's argument finite
MAX_LOGIT = 40.0


def vote_fraction(scored: pd.DataFrame, votes: pd.DataFrame, subset) -> tuple[np.ndarray, np.ndarray]:
    """(share of "present" votes, number of votes) of each row of ``scored`` (NaN share where
    the item has no vote in votes.csv)."""
    frame, _ = votes_of_scored(scored, votes, subset)
    item = frame["item"].to_numpy()
    present = np.bincount(item, weights=frame["binary"].to_numpy(np.float64), minlength=len(scored))
    n = np.bincount(item, minlength=len(scored))
    with np.errstate(invalid="ignore", divide="ignore"):
        return present / n, n


def platt_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the weights ``w`` (resamples × rows): the (a, b) maximising
    Σ w [y log σ(a x + b) + (1 − y) log(1 − σ(a x + b))], by Newton's method (the loss is convex).
    A constant x gets a = 0; separable rows stop at |a x + b| ≈ :data:`MAX_LOGIT`."""
    w = np.atleast_2d(w)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.clip((w @ y) / total, 1e-12, 1 - 1e-12)
    a, b = np.zeros(len(w)), np.log(mean / (1 - mean))
    for _ in range(NEWTON_STEPS):
        p = expit(np.clip(a[:, None] * x + b[:, None], -MAX_LOGIT, MAX_LOGIT))
        r, h = w * (p - y), w * p * (1 - p)
        ga, gb = r @ x, r.sum(axis=1)
        haa, hab, hbb = h @ (x * x), h @ x, h.sum(axis=1)
        det = haa * hbb - hab * hab
        with np.errstate(invalid="ignore", divide="ignore"):
            solvable = det > 1e-12 * np.maximum(haa * hbb, 1e-300)
            da = np.where(solvable, (hbb * ga - hab * gb) / det, 0.0)
            db = np.where(solvable, (haa * gb - hab * ga) / det, np.where(hbb > 0, gb / hbb, 0.0))
        da, db = np.nan_to_num(da), np.nan_to_num(db)
        a, b = a - da, b - db
        if max(np.abs(da).max(initial=0), np.abs(db).max(initial=0)) < 1e-10:
            break
    return a, b


def cv_probabilities(scores: np.ndarray, y: np.ndarray, folds: np.ndarray, w: np.ndarray) -> np.ndarray:
    """p of every row (columns) in every resample (rows of ``w``, how often each row was drawn):
    the Platt map fitted on the other folds' rows drawn (:func:`platt_fit`), applied to the row."""
    # standardised scores: the same maps, better conditioned
    spread = scores.std()
    x = (scores - scores.mean()) / spread if spread > 0 else np.zeros(len(scores))
    p = np.empty(w.shape)
    for f in np.unique(folds):
        train, test = folds != f, folds == f
        a, b = platt_fit(x[train], y[train], w[:, train])
        p[:, test] = expit(np.clip(a[:, None] * x[test] + b[:, None], -MAX_LOGIT, MAX_LOGIT))
    return p


def binary_entropy(p: np.ndarray) -> np.ndarray:
    """H(p) in bits, with 0·log 0 = 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return -(np.where(p > 0, p * np.log2(p), 0.0) + np.where(p < 1, (1 - p) * np.log2(1 - p), 0.0))


def jensen_shannon(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """JS divergence (bits) between Bernoulli(p) and Bernoulli(y), elementwise."""
    return binary_entropy((p + y) / 2) - (binary_entropy(p) + binary_entropy(y)) / 2


def calibration_bins(p: np.ndarray, targets: list[np.ndarray], w: np.ndarray):
    """Per resample (rows) and bin (columns): the weight of its rows, their mean p and, for each
    target y, their mean y (NaN in an empty bin). ``p``: resamples × rows; each y: rows."""
    b = np.minimum((p * BINS).astype(np.int64), BINS - 1) + BINS * np.arange(len(p))[:, None]
    b, size = b.ravel(), (len(p), BINS)

    def sums(v):
        return np.bincount(b, weights=v.ravel(), minlength=len(p) * BINS).reshape(size)

    weight = sums(w)
    with np.errstate(invalid="ignore", divide="ignore"):
        return weight, sums(w * p) / weight, [sums(w * y) / weight for y in targets]


def expected_calibration_error(weight: np.ndarray, mean_p: np.ndarray, mean_y: np.ndarray) -> np.ndarray:
    """ECE per resample (module docstring) from the bins of :func:`calibration_bins`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(weight * np.abs(mean_p - mean_y), axis=1) / weight.sum(axis=1)


def soft_figures(p: np.ndarray, targets: dict[str, np.ndarray], majority: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Resamples × figures, in the order of :func:`figure_names`: Brier and JSD against each
    target, ECE against the vote fraction and the majority, then the reliability bins (rows,
    mean p, mean vote fraction, mean majority)."""
    # a resample that drew no training rows for some fold has no map there: the figures are undefined
    undefined = (np.isnan(p) & (w > 0)).any(axis=1)
    p = np.where(np.isnan(p), 0.5, p)
    total = w.sum(axis=1)
    cols = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for y in targets.values():
            cols += [(w * (p - y) ** 2).sum(axis=1) / total, (w * jensen_shannon(p, y)).sum(axis=1) / total]
        weight, mean_p, (mean_q, mean_m) = calibration_bins(p, [targets["vote_fraction"], majority], w)
        cols += [expected_calibration_error(weight, mean_p, mean_q), expected_calibration_error(weight, mean_p, mean_m)]
    out = np.column_stack([*cols, weight, mean_p, mean_q, mean_m])
    out[undefined] = np.nan
    return out


def figure_names(targets) -> list[str]:
    names = [f"{kind}_{t}" for t in targets for kind in ("brier", "jensen_shannon")]
    return names + ["ece_vote_fraction", "ece_majority"]


def soft_label_block(scored: pd.DataFrame, votes: pd.DataFrame, subset, *, logit: bool, folds: np.ndarray,
                     bootstrap: Bootstrap, ds_posterior: np.ndarray | None = None) -> tuple[dict, pd.DataFrame]:
    """``(summary.json["soft_labels"], calibration.csv)`` of the rows scored ok (module
    docstring): for the model and for the sampling prior, each figure with its interval, and the
    reliability bins. ``folds``: each row's clip fold; ``ds_posterior``: each row's Dawid–Skene
    probability of "present" (None: not fitted)."""
    q, n_votes = vote_fraction(scored, votes, subset)
    has = n_votes > 0
    block = {"definition": "the model's probability against each item's vote fraction (README: soft labels)",
             "probability": ("sigmoid of the logit similarity" if logit else
                             "cross-validated Platt map of the similarity, fitted on the other folds' clips"),
             "items": int(has.sum()), "items_without_votes": int((~has).sum()),
             "items_tied": int((has & (q == 0.5)).sum()), "items_one_rater": int((n_votes == 1).sum()),
             "bins": BINS}
    if not has.any():
        return {**block, "model": None, "sampling_prior": None}, pd.DataFrame()
    rows = scored[has].reset_index(drop=True)
    q, folds = q[has], np.asarray(folds)[has]
    targets = {"vote_fraction": q}
    if ds_posterior is not None:
        targets["dawid_skene"] = np.asarray(ds_posterior, dtype=np.float64)[has]
    majority = rows["majority_present"].to_numpy(np.float64)
    clip = pd.factorize(rows["clip"].astype(str), sort=True)[0]
    n_clips = int(clip.max()) + 1
    prior = (subset.prior_present(rows) * 2 - 1).astype(np.float64)
    sims = rows["similarity"].to_numpy(np.float64)
    names = figure_names(targets)
    tables = []
    for scorer, score, fixed in (("model", sims, logit), ("sampling_prior", prior, False)):
        def probability(w, score=score, fixed=fixed):
            return np.broadcast_to(expit(score), w.shape) if fixed else cv_probabilities(score, q, folds, w)

        def statistic(wc, probability=probability):
            w = wc[:, clip]
            return soft_figures(probability(w), targets, majority, w)

        point = statistic(np.ones((1, n_clips)))[0]
        draws = bootstrap.map(statistic, n_clips, cells_per_resample=len(rows))
        out = {name: {"value": float(point[k]) if np.isfinite(point[k]) else None,
                      "ci95": percentile_interval(draws[:, k]) if len(draws) else None}
               for k, name in enumerate(names)}
        # the vote fractions as the positives' weights (ranking.py's AUROC takes fractional truth as weights)
        a = auroc_with_intervals(q, score, rows["clip"].to_numpy(), rows[subset.category_slice].to_numpy(),
                                 bootstrap=bootstrap)
        out["soft_auroc"] = {"value": a["auroc"], "ci95": a["auroc_ci95"]}
        out["soft_macro_auroc"] = {"value": a["macro_auroc"], "ci95": a["macro_auroc_ci95"]}
        block[scorer] = out
        base = len(names)
        for b in range(BINS):
            cells = {"rows": point[base + b], "mean_probability": point[base + BINS + b],
                     "mean_vote_fraction": point[base + 2 * BINS + b], "mean_majority": point[base + 3 * BINS + b]}
            q_ci = percentile_interval(draws[:, base + 2 * BINS + b]) if len(draws) else None
            m_ci = percentile_interval(draws[:, base + 3 * BINS + b]) if len(draws) else None
            tables.append({"scorer": scorer, "bin": b, "bin_low": b / BINS, "bin_high": (b + 1) / BINS,
                           # no map where no other fold has rows (a run of one clip): the figures are undefined
                           "rows": int(cells["rows"]) if np.isfinite(cells["rows"]) else None,
                           **{k: (float(v) if np.isfinite(v) else None) for k, v in cells.items() if k != "rows"},
                           "vote_fraction_ci_low": q_ci[0] if q_ci else None, "vote_fraction_ci_high": q_ci[1] if q_ci else None,
                           "majority_ci_low": m_ci[0] if m_ci else None, "majority_ci_high": m_ci[1] if m_ci else None})
    return block, pd.DataFrame(tables)
