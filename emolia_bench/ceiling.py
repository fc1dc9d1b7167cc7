"""The noise ceiling: how well *any* scorer could agree with a new human vote, given how noisy
the votes are (``summary.json["rater_models"]["noise_ceiling"]`` and ``["noise_ceiling"]`` of
the benchmark).

**Binary votes** (from the Dawid–Skene fit, :mod:`rater_models`). An item's next vote comes
from a rater drawn as often as each rater voted, so given the item's true class it is "present"
with probability s̄ (present) or 1 − c̄ (absent), s̄ and c̄ the raters' sensitivities and
specificities averaged with those shares. Given the true class, nothing else tells more about
that vote (the votes are independent given the class), so no scorer — however well it hears —
predicts it better than the more likely side: the **ceiling** is the mean over items of

    π · max(s̄, 1 − s̄) + (1 − π) · max(c̄, 1 − c̄),

π = P(present | the item's votes), the Dawid–Skene posterior: the expected accuracy on a
held-out vote of the Bayes predictor that knows each item's class. Beside it: the **votes'
own predictor**, max(v, 1 − v) with v = π s̄ + (1 − π)(1 − c̄) the probability that the next
vote says present given the votes so far (what the existing votes alone predict); the
**constant predictor**, always the side more votes take, max(v̄, 1 − v̄) over all items; and for
a scorer's 0/1 decisions d, its **agreement with the votes**: per item, the share of its votes
equal to d, averaged over items (items weigh alike, as in the ceiling). The humans' figure on
this footing is, per item, the share of its pairs of raters who agree.
``headroom_reached`` = (agreement − constant) / (ceiling − constant); undefined when the
ceiling equals the constant predictor; its ``band`` (:func:`headroom_band`) is the report's
reading of it. Intervals resample items (analysis) or clips (benchmark) and re-fit Dawid–Skene
in every resample (:func:`dawid_skene_refit`): holding the fitted channels fixed, the interval
covered the ceiling in 1 of 8 simulated benchmarks of 200 clips and 3 of 12 of 2,700 clips
(``bench/coverage_soft.py`` before the re-fit), since the fit's own uncertainty, not the items',
dominates it.

**Graded ratings**: the reliability of an item's *mean* rating, by the Spearman–Brown formula
from the one-way intraclass correlation of single ratings on the items with ≥ 2 ratings,
ICC(1) = (MSB − MSW) / (MSB + (k₀ − 1) MSW), k₀ = (N − Σ nᵢ² / N) / (m − 1) for m items with
nᵢ ratings, N in all (the unbalanced ANOVA estimator); then ρ_k = k ICC / (1 + (k − 1) ICC)
with k the harmonic mean of nᵢ (the mean's error variance goes as the mean of 1/nᵢ). A scorer
correlates with the mean rating at most √ρ_k (for Pearson's r; a guide for Spearman's ρ).
Undefined (None) with fewer than 2 items of ≥ 2 ratings, or when MSB + (k₀ − 1)·MSW is 0.
"""

from __future__ import annotations

import numpy as np

from .resampling import Bootstrap, percentile_interval

EPS = 1e-10  # crowd-kit's floor on a channel's counts, so no log meets 0


def channel_means(sensitivity: np.ndarray, specificity: np.ndarray, votes_per_rater: np.ndarray) -> tuple[float, float]:
    """(s̄, c̄): the raters' sensitivities and specificities weighted by their numbers of votes
    (raters without a channel left out); NaN when no rater has one."""
    share = np.asarray(votes_per_rater, dtype=np.float64)
    known = np.isfinite(sensitivity) & np.isfinite(specificity) & (share > 0)
    if not known.any():
        return float("nan"), float("nan")
    share = share[known] / share[known].sum()
    return float(share @ sensitivity[known]), float(share @ specificity[known])


def vote_agreement(decision: np.ndarray, item: np.ndarray, vote: np.ndarray, n_items: int) -> np.ndarray:
    """Per item: the share of its votes equal to the decision (NaN for an item without a vote)."""
    same = (decision[item] == vote).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(item, weights=same, minlength=n_items) / np.bincount(item, minlength=n_items)


def dawid_skene_refit(item: np.ndarray, rater: np.ndarray, vote: np.ndarray, n_items: int, n_raters: int,
                      iterations: int):
    """The function ``item weights (resamples × items) -> (π, s̄, c̄)``: binary Dawid–Skene fitted
    on every resample at once (an item drawn w times counts w times) exactly as crowd-kit fits it
    — started from the vote fractions, then ``iterations`` rounds of E-step (posteriors), prior
    and M-step (channels) — with the number of rounds the fit on the data took. π is each item's
    posterior of present (resamples × items); s̄, c̄ the raters' sensitivities and specificities
    averaged with their shares of the resample's votes (resamples). At weight 1 it equals
    crowd-kit's fit (tests/test_soft_labels.py)."""
    from scipy import sparse

    vote = np.asarray(vote, dtype=np.float64)
    to_item = sparse.csr_array((np.ones(len(item)), (np.arange(len(item)), item)), shape=(len(item), n_items))
    to_rater = sparse.csr_array((np.ones(len(item)), (np.arange(len(item)), rater)), shape=(len(item), n_raters))
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = (vote @ to_item) / (np.ones(len(item)) @ to_item)  # crowd-kit's start: the majority-vote shares

    def channels(w, wv, pi):
        a = wv * pi[:, item]  # each vote's weight times its item's probability of present
        # votes counted by (rater, vote, class), each floored at EPS as crowd-kit does
        yes_present, no_present = [np.maximum((a * x) @ to_rater, EPS) for x in (vote, 1 - vote)]
        yes_absent, no_absent = [np.maximum(((wv - a) * x) @ to_rater, EPS) for x in (vote, 1 - vote)]
        with np.errstate(invalid="ignore", divide="ignore"):
            prev = (w * pi).sum(axis=1) / w.sum(axis=1)
        return (yes_present / (yes_present + no_present), no_absent / (no_absent + yes_absent),
                np.clip(prev, EPS, 1 - EPS))

    def fit(w):
        wv = w[:, item]  # each vote weighs as its item was drawn
        pi = np.broadcast_to(fraction, w.shape)
        sens, spec, prev = channels(w, wv, pi)
        for _ in range(iterations):
            s, c = sens[:, rater], spec[:, rater]
            log_odds = (vote * np.log(s / (1 - c)) + (1 - vote) * np.log((1 - s) / c)) @ to_item
            pi = 1 / (1 + np.exp(-np.clip(log_odds + np.log(prev / (1 - prev))[:, None], -700, 700)))
            sens, spec, prev = channels(w, wv, pi)
        share = wv @ to_rater
        share = share / share.sum(axis=1, keepdims=True)
        return pi, (share * sens).sum(axis=1), (share * spec).sum(axis=1)

    return fit


def ceiling_block(refit, unit: np.ndarray, *, bootstrap: Bootstrap, channels: tuple[float, float],
                  agreements: dict[str, np.ndarray] | None = None) -> dict:
    """The ceiling, the votes' own predictor, the constant predictor and each scorer's agreement
    (``agreements``: per item, from :func:`vote_agreement`) with the headroom it reaches, each
    with its interval over resamples of ``unit`` (each item's unit code; module docstring), the
    Dawid–Skene fit re-run in every resample (``refit``, from :func:`dawid_skene_refit`).
    ``channels``: the fit's (s̄, c̄), reported. Items with a NaN agreement are left out of that
    scorer's figures."""
    unit = np.asarray(unit, dtype=np.int64)
    agreements = agreements or {}
    if not len(unit) or not all(np.isfinite(channels)):
        return {"items": int(len(unit)), "ceiling": None}
    n_units = int(unit.max()) + 1

    def statistic(wu):
        w = wu[:, unit]
        total = w.sum(axis=1)
        pi, s_bar, c_bar = refit(w)
        v = pi * s_bar[:, None] + (1 - pi) * (1 - c_bar[:, None])
        best_present, best_absent = np.maximum(s_bar, 1 - s_bar)[:, None], np.maximum(c_bar, 1 - c_bar)[:, None]
        ceiling = (w * (pi * best_present + (1 - pi) * best_absent)).sum(axis=1) / total
        votes_own = (w * np.maximum(v, 1 - v)).sum(axis=1) / total
        mean_v = (w * v).sum(axis=1) / total
        constant = np.maximum(mean_v, 1 - mean_v)
        out = [ceiling, votes_own, constant]
        for a in agreements.values():
            ok = np.isfinite(a)
            with np.errstate(invalid="ignore", divide="ignore"):
                agree = (w[:, ok] @ a[ok]) / w[:, ok].sum(axis=1)
                out += [agree, np.where(ceiling > constant, (agree - constant) / (ceiling - constant), np.nan)]
        return np.column_stack(out)

    with np.errstate(invalid="ignore", divide="ignore"):
        point = statistic(np.ones((1, n_units)))[0]
        draws = bootstrap.map(statistic, n_units, cells_per_resample=len(unit) * 8).reshape(-1, len(point))

    def figure(k):
        return {"value": float(point[k]) if np.isfinite(point[k]) else None, "ci95": percentile_interval(draws[:, k])}

    out = {"definition": "expected accuracy on a held-out vote of the Bayes predictor that knows each item's class, "
                         "from the Dawid-Skene fit (README: rater models)",
           "items": int(len(unit)), "mean_sensitivity": float(channels[0]), "mean_specificity": float(channels[1]),
           "ceiling": figure(0), "votes_own_predictor": figure(1), "constant_predictor": figure(2)}
    for j, name in enumerate(agreements):
        agree, headroom = figure(3 + 2 * j), figure(4 + 2 * j)
        out[name] = {"agreement_with_votes": agree, "headroom_reached": headroom,
                     "band": headroom_band(agree, headroom, out["ceiling"]["value"]),
                     "items": int(np.isfinite(agreements[name]).sum())}
    return out


def headroom_band(agree: dict, headroom: dict, ceiling: float | None) -> str:
    """Where a scorer's agreement with the votes sits between the constant predictor and the
    ceiling, read off its interval: "at the ceiling" (the agreement's interval reaches the
    ceiling), "above the constant predictor" (the headroom's interval is above 0), "below the
    constant predictor" (below 0), else "no better than a constant prediction"; "undefined"
    without an interval."""
    a, h = agree.get("ci95"), headroom.get("ci95")
    if a is None or h is None or ceiling is None:
        return "undefined"
    if a[1] >= ceiling:
        return "at the ceiling"
    if h[0] > 0:
        return "above the constant predictor"
    return "below the constant predictor" if h[1] < 0 else "no better than a constant prediction"


def mean_rating_reliability(value: np.ndarray, item: np.ndarray, unit_of_item: np.ndarray, *,
                            bootstrap: Bootstrap) -> dict:
    """ICC(1) of single ratings, the Spearman–Brown reliability of the item mean and its square
    root (the ceiling on a correlation with the mean rating), each with its interval resampling
    the units of ``unit_of_item`` (module docstring). ``value``/``item``: one row per rating,
    item codes 0..m-1."""
    value, item = np.asarray(value, dtype=np.float64), np.asarray(item, dtype=np.int64)
    n_items = int(item.max()) + 1 if len(item) else 0
    n = np.bincount(item, minlength=n_items).astype(np.float64)
    s1 = np.bincount(item, weights=value, minlength=n_items)
    s2 = np.bincount(item, weights=value * value, minlength=n_items)
    keep = n >= 2  # single ratings of items rated once carry no within-item information
    n, s1, s2 = n[keep], s1[keep], s2[keep]
    unit = np.asarray(unit_of_item, dtype=np.int64)[keep]
    n_units = int(unit.max()) + 1 if len(unit) else 0
    with np.errstate(invalid="ignore", divide="ignore"):
        within_item = s2 - s1 * s1 / n  # Σ (x − item mean)² per item

    def statistic(wu):
        w = wu[:, unit]  # how often each item was drawn
        m, big_n = w.sum(axis=1), w @ n
        with np.errstate(invalid="ignore", divide="ignore"):
            grand = (w @ s1) / big_n
            ssb = w @ (s1 * s1 / n) - big_n * grand * grand
            ssw = w @ within_item
            msb, msw = ssb / (m - 1), ssw / (big_n - m)
            k0 = (big_n - (w @ (n * n)) / big_n) / (m - 1)
            icc = (msb - msw) / (msb + (k0 - 1) * msw)
            k = m / (w @ (1 / n))  # harmonic mean of the ratings per item
            sb = k * icc / (1 + (k - 1) * icc)
            return np.column_stack([icc, sb, np.sqrt(np.clip(sb, 0, None)), k])

    out = {"definition": "Spearman-Brown reliability of the mean rating from ICC(1) of single ratings "
                         "(README: rater models)", "items": int(keep.sum()), "ratings": int(n.sum())}
    if keep.sum() < 2:
        return {**out, "icc1": None, "reliability_of_mean": None, "correlation_ceiling": None, "raters_per_item": None}
    point = statistic(np.ones((1, n_units)))[0]
    draws = bootstrap.map(statistic, n_units, cells_per_resample=int(keep.sum())).reshape(-1, 4)
    for k, name in enumerate(("icc1", "reliability_of_mean", "correlation_ceiling")):
        out[name] = {"value": float(point[k]) if np.isfinite(point[k]) else None, "ci95": percentile_interval(draws[:, k])}
    out["raters_per_item"] = float(point[3])
    return out
