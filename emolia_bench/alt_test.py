"""May the model stand in for one of the raters? The alternative annotator test (Calderon,
Reichart & Dror, ACL 2025, "The Alternative Annotator Test for LLM-as-a-Judge"), applied to a
scorer's decisions (``summary.json["alt_test"]``).

For each rater j, on every item j rated together with at least two other raters (so that the
others form a group, as the paper asks; items with three or more votes):

* S_model = the share of the other raters' votes on the item that the model's decision equals,
  S_j = the share of them that j's own vote equals (the paper's accuracy alignment, here on the
  binary label: present / absent, yes / no). The ordinal variant (an ordinal subset: emo's
  not / weakly / strongly present) follows the paper's ranking extension: each rater's ratings
  and the model's similarities become percentile ranks (ties share the mean rank), and
  S = −√(mean over the others of (one's rank − theirs)²) — the model needs no ordinal answer of
  its own;
* W_model = 1[S_model ≥ S_j], W_j = 1[S_j ≥ S_model] (a tie counts for both);
* ρ_model(j) = mean W_model and ρ_j = mean W_j over j's items: the advantage probabilities;
* H0_j: ρ_model(j) ≤ ρ_j − ε against H1_j: ρ_model(j) > ρ_j − ε, a one-sided paired t-test on
  d = W_j − W_model (t = (ε − mean d) / (sd d / √n), n − 1 degrees of freedom; when every d is
  the same, p is 0 if mean d < ε, else 1). ε (``--alt-epsilon``, default 0.1) is the advantage
  the humans must keep for the model not to replace them: the paper advises 0.2 for experts,
  0.15 for skilled annotators and 0.1 for crowd-workers, and a smaller ε when the humans agree
  little — the real emo raters' mean pairwise κ is +0.11;
* the p-values of the raters are adjusted by Benjamini–Yekutieli (any dependence between the
  tests) and H0_j is rejected at q ≤ ``alpha`` (0.05): the model *beats* rater j;
* the winning rate ω is the share of raters the model beats; the verdict is "may replace a
  rater at ε" when ω ≥ 0.5, else "may not replace a rater at ε";
* ρ, the average advantage probability, is the mean of ρ_model(j) over the raters tested: it
  ranks scorers (the paper's measure for choosing among judges);
* with the raters regarded as a sample of raters, ω estimates the share of raters in general
  the model beats: its 95 % interval is the exact (Clopper–Pearson) binomial interval of the
  wins among the m raters tested — with three raters and three wins, [0.29, 1].

Undefined: a rater with fewer than :data:`MIN_ITEMS` such items is not tested (the t-test's
normality needs 30; the paper); fewer than :data:`MIN_RATERS` tested raters gives the verdict
"too few", with the counts, and no winning rate (the paper asks for three annotators: with two,
each is judged by one other person, not a group).

The model's decision is its ``pred_present`` at the run's threshold — the decision the model as
one more rater is scored with (:mod:`vs_humans`). The test needs no interval: its answer is the
verdict at level α; ω and ρ are reported with the numbers of raters and items they rest on.

A control: the same test of a *random* rater that calls "present" on each item with the
scorer's own rate (seeded). When raters agree little, their votes on an item often split, every
answer then ties with the held-out rater's, and the advantage probabilities of anyone — a coin
included — come close to the humans'. If the random rater passes at ε too, the verdict is
"inconclusive at ε": these raters agree too little for the test to tell a model from chance at
that margin. (Reference: the authors' implementation, github.com/nitaytech/AltTest, counts
ties for both sides and tests raters with ≥ 30 items, as here; it accepts items with a single
other rater, where this module asks for two, the group the paper's text describes.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .defaults import ALT_EPSILON as EPSILON

MIN_ITEMS = 30
MIN_RATERS = 3
ALPHA = 0.05


def advantage_indicators(frame: pd.DataFrame, model: np.ndarray, alignment: str = "exact") -> pd.DataFrame:
    """Per vote of an item with ≥ 3 votes: ``rater``, ``item``, ``w_model`` and ``w_rater`` (the
    indicators of the module docstring). ``frame``: ``item`` (codes into ``model``), ``rater``,
    ``score`` (the rater's answer), one row per (item, rater); ``model``: the model's answer per
    item. ``alignment``: ``"exact"`` — the share of the others' answers equal to one's own;
    ``"rank"`` — minus the root mean squared difference from the others' answers (the paper's
    −RMSE, used on ranks)."""
    item = frame["item"].to_numpy(np.int64)
    own = frame["score"].to_numpy(np.float64)
    n = np.bincount(item)[item]
    keep = n >= 3
    others = n - 1
    total = np.bincount(item, weights=own)[item] - own  # the others' sum and sum of squares
    squares = np.bincount(item, weights=own**2)[item] - own**2
    x = model[item].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if alignment == "exact":  # answers 0/1: agreements with the others
            agree_rater = np.where(own == 1, total, others - total) / others
            agree_model = np.where(x == 1, total, others - total) / others
        else:  # −RMSE: Σ (a − r_k)² = n·a² − 2a·Σ r_k + Σ r_k²
            agree_rater = -np.sqrt(np.maximum(others * own**2 - 2 * own * total + squares, 0) / others)
            agree_model = -np.sqrt(np.maximum(others * x**2 - 2 * x * total + squares, 0) / others)
    return pd.DataFrame({"rater": frame["rater"].to_numpy()[keep], "item": item[keep],
                         "w_model": (agree_model >= agree_rater)[keep].astype(np.int64),
                         "w_rater": (agree_rater >= agree_model)[keep].astype(np.int64)})


def one_sided_p(d: np.ndarray, epsilon: float) -> float:
    """p of H0: mean(d) ≥ ε against mean(d) < ε, one-sample t-test with n − 1 degrees of freedom."""
    mean = float(np.mean(d))
    if np.all(d == d[0]):  # no spread: the sign decides
        return 0.0 if mean < epsilon else 1.0
    return float(stats.ttest_1samp(d, epsilon, alternative="less").pvalue)


def alt_test(frame: pd.DataFrame, decision: np.ndarray, rater_names, *, epsilon: float = EPSILON,
             alpha: float = ALPHA, min_items: int = MIN_ITEMS, min_raters: int = MIN_RATERS,
             alignment: str = "exact") -> dict:
    """The test of the module docstring for one scorer's ``decision`` (0/1 per item code),
    without the random-rater control (:func:`alt_test_with_control`)."""
    scored = frame.assign(score=frame["binary"] if alignment == "exact" else frame["rank"])
    w = advantage_indicators(scored, np.asarray(decision), alignment)
    per_rater = []
    for code, g in w.groupby("rater", sort=True):
        d = (g["w_rater"] - g["w_model"]).to_numpy(np.float64)
        row = {"rater": str(rater_names[code]), "n_items": int(len(g)),
               "rho_model": float(g["w_model"].mean()), "rho_rater": float(g["w_rater"].mean())}
        row["p"] = one_sided_p(d, epsilon) if len(g) >= min_items else None
        per_rater.append(row)
    tested = [r for r in per_rater if r["p"] is not None]
    out = {"epsilon": float(epsilon), "alpha": float(alpha), "min_items": int(min_items),
           "min_raters": int(min_raters),
           "alignment": "exact match of the binary label" if alignment == "exact" else
                        "−RMSE of ranks: each rater's ratings and the model's similarities as percentile ranks",
           "n_raters": len(per_rater), "n_raters_tested": len(tested),
           "n_items": int(w["item"].nunique()) if len(w) else 0}
    if tested:
        q = stats.false_discovery_control([r["p"] for r in tested], method="by")
        for r, qv in zip(tested, q, strict=True):
            r["q_by"] = float(qv)
            r["model_beats_rater"] = bool(qv <= alpha)
    out["per_rater"] = per_rater
    if len(tested) < min_raters:
        counts = ", ".join(f"{r['rater']}: {r['n_items']}" for r in per_rater) or "none"
        out.update(winning_rate=None, winning_rate_raters_as_sampled_ci95=None, rho=None, verdict="too few",
                   why=f"{len(tested)} rater(s) with at least {min_items} items rated with two or more others "
                       f"({counts}); the test needs {min_raters}")
        return out
    wins = sum(r["model_beats_rater"] for r in tested)
    out["winning_rate"] = wins / len(tested)
    # raters as a sample of raters: the share of raters in general the model beats, from wins of
    # the m tested (Clopper–Pearson, exact binomial); the rater sample is what limits it
    ci = stats.binomtest(wins, len(tested)).proportion_ci(confidence_level=0.95, method="exact")
    out["winning_rate_raters_as_sampled_ci95"] = [float(ci.low), float(ci.high)]
    out["rho"] = float(np.mean([r["rho_model"] for r in tested]))
    out["verdict"] = (f"may replace a rater at ε = {epsilon:g}" if out["winning_rate"] >= 0.5
                      else f"may not replace a rater at ε = {epsilon:g}")
    return out


def alt_test_with_control(frame: pd.DataFrame, decision: np.ndarray, rater_names, *, seed: int,
                          epsilon: float = EPSILON, alpha: float = ALPHA, alignment: str = "exact") -> dict:
    """:func:`alt_test` of ``decision`` and of a random rater calling "present" at the same rate
    (seeded), whose result is kept as ``random_rater``; a verdict that the random rater reaches
    too becomes "inconclusive at ε" (module docstring)."""
    out = alt_test(frame, decision, rater_names, epsilon=epsilon, alpha=alpha, alignment=alignment)
    rng = np.random.default_rng(seed)
    if alignment == "exact":  # a coin calling present at the scorer's rate
        rate = float(np.mean(decision)) if len(decision) else 0.0
        coin = (rng.random(len(decision)) < rate).astype(np.int64)
    else:  # a random ranking of the items
        rate = None
        coin = (rng.permutation(len(decision)) + 1) / max(len(decision), 1)
    control = alt_test(frame, coin, rater_names, epsilon=epsilon, alpha=alpha, alignment=alignment)
    out["random_rater"] = {k: control[k] for k in ("winning_rate", "rho", "verdict", "n_raters_tested")}
    out["random_rater"]["present_rate"] = rate
    if out["winning_rate"] is not None and out["winning_rate"] >= 0.5 and control["winning_rate"] is not None \
            and control["winning_rate"] >= 0.5:
        out["verdict"] = (f"inconclusive at ε = {epsilon:g}: a random rater calling present as often passes too "
                          "(these raters agree too little for the test to tell)")
    return out
