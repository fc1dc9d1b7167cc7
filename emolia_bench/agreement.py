"""Inter-rater agreement and the human upper bound (SPEC §3.5–3.6).

Input everywhere is a long frame of cleaned votes with integer columns ``item``, ``rater``,
``binary`` and (ordinal subsets) ``value``: one row per item and rater. Rater codes follow the
sorted rater names, so ``a < b`` in codes is ``a < b`` in names.

Definitions and undefined cases (undefined -> ``None``, written as JSON ``null``):

* complete item: exactly 3 raters.
* ``exact_3way``: share of complete items whose ratings are all equal; None without complete
  items.
* ``pairwise_exact``: per rater pair, the share of complete items rated by both on which they
  agree; mean over pairs with at least one such item [ours: missing cells are not
  disagreements]. None when no pair shares a complete item.
* Cohen's κ per pair on the complete items both rated (statsmodels); None when the pair shares
  no complete item or p_e = 1 (both raters constant and equal). ``mean`` over defined pairs.
* Fleiss' κ over complete items (statsmodels); None without complete items or when p_e = 1.
* pairwise accuracy: over all items, per pair with a co-rated item, the share of co-rated items
  with equal binary votes; unweighted mean over pairs. Balanced: for each pair, balanced
  accuracy with A as truth and B as prediction and vice versa, each kept only when its truth
  has both classes; mean of kept values.
* leave-one-out: on items with ≥3 votes, every vote against the majority of the item's other
  votes; ties among the others are skipped; pooled. Its balanced accuracy is
  :func:`metrics.balanced_accuracy_over_present_classes` (scikit-learn's semantics: mean recall
  over the truth classes present), as upstream computes it; the sampling prior's agreement with
  the consensus likewise.
* Krippendorff's α [ours]: over all items with ≥2 raters (``krippendorff`` package); None when
  fewer than one such item or no variation.
"""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pandas as pd

from .defaults import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED
from .metrics import balanced_accuracy_from_sums, balanced_accuracy_over_present_classes
from .resampling import bootstrap_statistic, percentile_interval

PRESELECT_RATER = "gemini3flash_preselect"
PRESELECTION_MIN_HUMANS = 2


def _nanmean(values) -> float | None:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def _finite(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def inter_rater():
    """``statsmodels.stats.inter_rater``, imported without what it pulls in but we never use.

    The module imports ``scipy.stats`` only for the p-values of its results objects, which we
    never ask for (``return_results=False``), and ``scipy.linalg`` (through statsmodels.tools)
    pulls in ``numpy.f2py`` and ``numpy.testing``; together ~1 s on these machines, half the
    analysis budget. :func:`emolia_bench.lazy_imports.spare_unused_modules` binds those lazily:
    they load, transparently, the first time anything touches one of their attributes.
    """
    import sys

    if "statsmodels.stats.inter_rater" not in sys.modules:
        from .lazy_imports import spare_unused_modules

        spare_unused_modules()
    import statsmodels.stats.inter_rater as inter_rater_module

    return inter_rater_module


# ---------------------------------------------------------------------------------------------
# pairs


def co_rated_pairs(votes: pd.DataFrame, columns=("binary",)) -> pd.DataFrame:
    """One row per item and rater pair a < b that both rated it, with both raters' votes."""
    cols = ["item", "rater", *columns]
    left = votes[cols]
    pairs = left.merge(left, on="item", suffixes=("_a", "_b"))
    pairs = pairs[pairs["rater_a"] < pairs["rater_b"]]
    return pairs.rename(columns={"rater_a": "a", "rater_b": "b"}).reset_index(drop=True)


def pair_tables(pairs: pd.DataFrame, column: str, n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rater pair, the n_values × n_values contingency table of (A's vote, B's vote).

    Built in one vectorised pass; returns ``(a, b, tables)`` for the pairs that co-rated at
    least one of the given items, sorted by (a, b).
    """
    if len(pairs) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, n_values, n_values))
    a, b = pairs["a"].to_numpy(np.int64), pairs["b"].to_numpy(np.int64)
    pair_id, uniq = pd.factorize(a * (b.max() + 1) + b, sort=True)
    cells = (pair_id * n_values + pairs[f"{column}_a"].to_numpy(np.int64)) * n_values + pairs[f"{column}_b"].to_numpy(np.int64)
    tables = np.bincount(cells, minlength=len(uniq) * n_values**2).reshape(len(uniq), n_values, n_values)
    return uniq // (b.max() + 1), uniq % (b.max() + 1), tables.astype(np.float64)


def pairwise_exact(pairs: pd.DataFrame, column: str, n_values: int = 2) -> float | None:
    """Mean over pairs of the share of (given) co-rated items on which the pair agrees."""
    _, _, t = pair_tables(pairs, column, n_values)
    if len(t) == 0:
        return None
    return float(np.mean(np.trace(t, axis1=1, axis2=2) / t.sum(axis=(1, 2))))


def pairwise_kappa(pairs: pd.DataFrame, column: str, raters: list[str], n_values: int = 2) -> dict[str, float | None]:
    """Cohen's κ (statsmodels, unweighted) for every pair of raters (``"<a>__<b>"``) and their ``mean``."""
    cohens_kappa = inter_rater().cohens_kappa

    a, b, tables = pair_tables(pairs, column, n_values)
    by_pair = dict(zip(zip(a.tolist(), b.tolist(), strict=True), tables, strict=True))
    out: dict[str, float | None] = {}
    for i, j in combinations(range(len(raters)), 2):
        table = by_pair.get((i, j))
        kappa = None
        if table is not None:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                kappa = _finite(cohens_kappa(table, return_results=False))
        out[f"{raters[i]}__{raters[j]}"] = kappa
    out["mean"] = _nanmean(out.values())
    return out


def pairwise_accuracy(pairs: pd.DataFrame) -> tuple[float | None, float | None]:
    """(accuracy, balanced accuracy) of raters against each other, pair by pair, binary.

    From each pair's 2 × 2 table t[A's vote, B's vote]: accuracy = trace / total; balanced
    accuracy with A as truth = (t11/(t10+t11) + t00/(t00+t01)) / 2, kept only when A used both
    classes, and likewise with B as truth (the columns). Tests check both against
    scikit-learn's balanced_accuracy_score.
    """
    _, _, t = pair_tables(pairs, "binary", 2)
    if len(t) == 0:
        return None, None
    acc = np.trace(t, axis1=1, axis2=2) / t.sum(axis=(1, 2))
    bals = []
    for tt in (t, t.transpose(0, 2, 1)):  # A as truth (rows), then B as truth
        pos, neg = tt[:, 1, :].sum(1), tt[:, 0, :].sum(1)
        both = (pos > 0) & (neg > 0)
        bals.append(balanced_accuracy_from_sums(tt[both, 1, 1], pos[both], tt[both, 0, 0], neg[both]))
    kept = np.concatenate(bals)
    return float(acc.mean()), (float(kept.mean()) if len(kept) else None)


# ---------------------------------------------------------------------------------------------
# panel statistics


def votes_per_item(votes: pd.DataFrame) -> np.ndarray:
    """For each vote, how many votes its item has (item codes are non-negative integers)."""
    item = votes["item"].to_numpy(np.int64)
    return np.bincount(item)[item]


def complete_matrix(votes: pd.DataFrame, column: str, n_per_item: int = 3) -> np.ndarray:
    """items × n matrix of the votes of items with exactly ``n_per_item`` raters, rows in item
    order and columns in rater order."""
    keep = votes_per_item(votes) == n_per_item
    item, rater = votes["item"].to_numpy()[keep], votes["rater"].to_numpy()[keep]
    order = np.lexsort((rater, item))  # (item, rater) is unique: one vote per rater and item
    return votes[column].to_numpy()[keep][order].reshape(-1, n_per_item)


def exact_agreement(matrix: np.ndarray) -> float | None:
    if len(matrix) == 0:
        return None
    return float(np.mean((matrix == matrix[:, :1]).all(axis=1)))


def fleiss(matrix: np.ndarray) -> float | None:
    """Fleiss' κ of an items × raters matrix with every cell filled (statsmodels)."""
    if len(matrix) == 0:
        return None
    ir = inter_rater()

    table, _ = ir.aggregate_raters(matrix)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _finite(ir.fleiss_kappa(table, method="fleiss"))


def krippendorff_alpha(votes: pd.DataFrame, column: str, n_values: int, level: str) -> float | None:
    """Krippendorff's α over items with ≥2 raters (missing cells allowed)."""
    sub = votes[votes_per_item(votes) >= 2]
    if len(sub) == 0:
        return None
    import krippendorff

    items = pd.factorize(sub["item"], sort=True)[0]
    raters = pd.factorize(sub["rater"], sort=True)[0]
    data = np.full((raters.max() + 1, items.max() + 1), np.nan)
    data[raters, items] = sub[column].to_numpy(dtype=np.float64)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            alpha = krippendorff.alpha(
                reliability_data=data, level_of_measurement=level, value_domain=list(range(n_values))
            )
    except (ValueError, ZeroDivisionError):
        return None
    return _finite(alpha)


def loo_comparisons(votes: pd.DataFrame) -> pd.DataFrame:
    """Every vote of an item with ≥3 votes against the majority of the item's other votes.

    Returns ``item, truth, pred`` for the comparisons used (others' ties skipped).
    """
    item, v = votes["item"].to_numpy(np.int64), votes["binary"].to_numpy(np.int64)
    n = votes_per_item(votes)
    ones = np.bincount(item, weights=v)[item].astype(np.int64)
    other_ones = ones - v
    other_zeros = (n - 1) - other_ones
    keep = (n >= 3) & (other_ones != other_zeros)
    return pd.DataFrame(
        {
            "item": item[keep],
            "truth": (other_ones > other_zeros).astype(np.int64)[keep],
            "pred": v[keep],
        }
    )


def loo_agreement(votes: pd.DataFrame) -> tuple[float | None, float | None, float]:
    """(accuracy, balanced accuracy, comparisons used) of leave-one-out agreement."""
    comp = loo_comparisons(votes)
    if len(comp) == 0:
        return None, None, 0.0
    truth, pred = comp["truth"].to_numpy(), comp["pred"].to_numpy()
    return float(np.mean(truth == pred)), balanced_accuracy_over_present_classes(truth, pred), float(len(comp))


# ---------------------------------------------------------------------------------------------
# bootstrap [ours]


class Resampled:
    """One bootstrapped statistic as rows for :func:`resampling.bootstrap_group_sums`: the units
    (sorted item codes), each row's unit position and group, its count values, the number of
    groups, and ``statistic``: grouped sums of a chunk -> one value per resample."""

    def __init__(self, items, unit, group, values, n_groups, statistic):
        self.items, self.unit, self.group, self.values = items, unit, group, values
        self.n_groups, self.statistic = n_groups, statistic

    def interval(self, seed: int, draws: int) -> list[float] | None:
        return percentile_interval(bootstrap_statistic(self.unit, self.group, self.values, len(self.items),
                                                       self.n_groups, self.statistic, draws, seed))


def _mean_agreement(sums) -> np.ndarray:
    n, a = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nanmean(np.where(n > 0, a / n, np.nan), axis=1)


def pairwise_accuracy_resampled(pairs: pd.DataFrame) -> Resampled | None:
    """The pairwise accuracy for the bootstrap; units are the co-rated items. Per resample and
    pair: co-rated items drawn (with multiplicity) and agreements among them; the statistic is
    the mean over pairs with at least one drawn item of agreements / items. None without pairs."""
    if len(pairs) == 0:
        return None
    item_codes, items = pd.factorize(pairs["item"], sort=True)
    pair_codes, uniq = pd.factorize(pairs["a"].astype(np.int64) * 1_000_003 + pairs["b"], sort=True)
    agree = (pairs["binary_a"] == pairs["binary_b"]).to_numpy(dtype=np.float64)
    return Resampled(np.asarray(items, dtype=np.int64), item_codes, pair_codes, [np.ones(len(pairs)), agree],
                     len(uniq), _mean_agreement)


def loo_accuracy_resampled(votes: pd.DataFrame) -> Resampled | None:
    """The leave-one-out accuracy for the bootstrap; units are the items with a comparison, the
    statistic the pooled share of correct comparisons. None without comparisons."""
    comp = loo_comparisons(votes)
    if len(comp) == 0:
        return None
    item_codes, items = pd.factorize(comp["item"], sort=True)
    correct = (comp["truth"] == comp["pred"]).to_numpy(dtype=np.float64)
    return Resampled(np.asarray(items, dtype=np.int64), item_codes, np.zeros(len(comp), np.int64),
                     [np.ones(len(comp)), correct], 1, lambda sums: sums[1][:, 0] / sums[0][:, 0])


def ceiling_intervals(pairs: pd.DataFrame, votes: pd.DataFrame, seed: int, draws: int
                      ) -> tuple[list[float] | None, list[float] | None]:
    """95 % percentile intervals of the pairwise and the leave-one-out accuracy, resampling
    items: the co-rated items for the first, the items with a comparison for the second. When
    the two sets are the same (every item fully rated), both statistics are read off one set
    of resamples — the very resamples each would draw alone with this seed."""
    pair, loo = pairwise_accuracy_resampled(pairs), loo_accuracy_resampled(votes)
    if pair is None or loo is None or not np.array_equal(pair.items, loo.items):
        return (None if pair is None else pair.interval(seed, draws)), (None if loo is None else loo.interval(seed, draws))
    g = pair.n_groups  # the LOO rows become one more group after the pairs'
    both = bootstrap_statistic(
        np.concatenate([pair.unit, loo.unit]), np.concatenate([pair.group, loo.group + g]),
        [np.concatenate([x, y]) for x, y in zip(pair.values, loo.values, strict=True)], len(pair.items), g + 1,
        lambda sums: np.column_stack([pair.statistic([s[:, :g] for s in sums]), loo.statistic([s[:, g:] for s in sums])]),
        draws, seed)
    return percentile_interval(both[:, 0]), percentile_interval(both[:, 1])


# ---------------------------------------------------------------------------------------------
# the summary blocks


def human_agreement(votes: pd.DataFrame, raters: list[str], ordinal: bool, n_values: int,
                    seed: int = BOOTSTRAP_SEED, draws: int = BOOTSTRAP_DRAWS) -> dict:
    """``summary.json["agreement"]`` for one subset, keys in the upstream order."""
    cols = ("binary", "value") if ordinal else ("binary",)
    pairs = co_rated_pairs(votes, cols)
    complete_items = votes.loc[votes_per_item(votes) == 3, "item"].unique()
    cpairs = pairs[pairs["item"].isin(complete_items)]
    bin3 = complete_matrix(votes, "binary")
    val3 = complete_matrix(votes, "value") if ordinal else None
    a: dict = {}
    if ordinal:
        a["exact_3way_ordinal"] = exact_agreement(val3)
    a["exact_3way_binary"] = exact_agreement(bin3)
    a["pairwise_exact_binary"] = pairwise_exact(cpairs, "binary")
    if ordinal:
        a["pairwise_exact_ordinal"] = pairwise_exact(cpairs, "value", n_values)
        a["pairwise_ordinal_kappa"] = pairwise_kappa(cpairs, "value", raters, n_values)
    a["pairwise_binary_kappa"] = pairwise_kappa(cpairs, "binary", raters)
    if ordinal:
        a["fleiss_ordinal_kappa"] = fleiss(val3)
    a["fleiss_binary_kappa"] = fleiss(bin3)
    acc, bal = pairwise_accuracy(pairs)
    a["human_pairwise_accuracy"] = acc
    a["human_pairwise_balanced_accuracy"] = bal
    loo_acc, loo_bal, loo_n = loo_agreement(votes)
    a["human_loo_accuracy"] = loo_acc
    a["human_loo_balanced_accuracy"] = loo_bal
    a["human_loo_n_annotations"] = loo_n
    # [ours]
    a["krippendorff_alpha_binary"] = krippendorff_alpha(votes, "binary", 2, "nominal")
    if ordinal:
        a["krippendorff_alpha_ordinal"] = krippendorff_alpha(votes, "value", n_values, "ordinal")
    a["human_pairwise_accuracy_ci95"], a["human_loo_accuracy_ci95"] = ceiling_intervals(pairs, votes, seed, draws)
    return a


def augmented_agreement(votes: pd.DataFrame, items: pd.DataFrame) -> dict:
    """``summary.json["augmented_agreement"]``: the panel plus the sampling-prior rater.

    ``items`` is the per-item table (``n_raters``, ``intended``, ``majority_present``,
    ``majority_present_tie``) indexed by item code. The synthetic rater votes the sampling
    prior on every item with ≥2 human raters; it is derived from the sampling design, not from
    any model output.
    """
    eligible = items.index[items["n_raters"] >= PRESELECTION_MIN_HUMANS]
    human = votes[votes["item"].isin(eligible)][["item", "rater", "binary"]]
    prior_code = int(votes["rater"].max()) + 1 if len(votes) else 0
    prior = pd.DataFrame(
        {"item": eligible.to_numpy(), "rater": prior_code, "binary": items.loc[eligible, "intended"].to_numpy()}
    )
    panel = pd.concat([human, prior], ignore_index=True)
    pairs = co_rated_pairs(panel)
    acc, bal = pairwise_accuracy(pairs)
    loo_acc, loo_bal, loo_n = loo_agreement(panel)
    # Fleiss on items where every rater column of the augmented pivot is filled
    n_cols = panel["rater"].nunique()
    full = complete_matrix(panel, "binary", n_per_item=n_cols) if n_cols else np.empty((0, 0))
    el = items.loc[eligible]
    decided = el[~el["majority_present_tie"].astype(bool)]
    truth, pred = decided["majority_present"].to_numpy(), decided["intended"].to_numpy()
    g_acc = float(np.mean(truth == pred)) if len(decided) else None
    g_bal = balanced_accuracy_over_present_classes(truth, pred)
    return {
        "preselection_min_humans": PRESELECTION_MIN_HUMANS,
        "preselection_n_eligible_items": int(len(eligible)),
        "preselection_pairwise_accuracy": acc,
        "preselection_pairwise_balanced_accuracy": bal,
        "preselection_loo_accuracy": loo_acc,
        "preselection_loo_balanced_accuracy": loo_bal,
        "preselection_loo_n_annotations": loo_n,
        "preselection_fleiss_kappa": fleiss(full),
        "preselection_n_full_coverage_items": int(len(full)),
        "gemini_vs_human_consensus_accuracy": g_acc,
        "gemini_vs_human_consensus_balanced_accuracy": g_bal,
        "gemini_vs_human_consensus_n_items": float(len(decided)),
    }
