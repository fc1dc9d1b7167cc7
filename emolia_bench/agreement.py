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
* Cohen's κ per pair on the complete items both rated (scikit-learn); None when the pair shares
  no complete item or p_e = 1 (both raters constant and equal). ``mean`` over defined pairs.
* Fleiss' κ over complete items (statsmodels); None without complete items or when p_e = 1.
* pairwise accuracy: over all items, per pair with a co-rated item, the share of co-rated items
  with equal binary votes; unweighted mean over pairs. Balanced: for each pair, balanced
  accuracy with A as truth and B as prediction and vice versa, each kept only when its truth
  has both classes; mean of kept values.
* leave-one-out: on items with ≥3 votes, every vote against the majority of the item's other
  votes; ties among the others are skipped; pooled. Balanced accuracy is scikit-learn's
  (mean recall over the truth classes present).
* Krippendorff's α [ours]: over all items with ≥2 raters (``krippendorff`` package); None when
  fewer than one such item or no variation.
"""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pandas as pd

from .resampling import bootstrap_sums, percentile_interval

PRESELECT_RATER = "gemini3flash_preselect"
PRESELECTION_MIN_HUMANS = 2
BOOTSTRAP_SEED = 20260401
BOOTSTRAP_DRAWS = 1000


def _nanmean(values) -> float | None:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def _finite(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


# ---------------------------------------------------------------------------------------------
# pairs


def co_rated_pairs(votes: pd.DataFrame, columns=("binary",)) -> pd.DataFrame:
    """One row per item and rater pair a < b that both rated it, with both raters' votes."""
    cols = ["item", "rater", *columns]
    left = votes[cols]
    pairs = left.merge(left, on="item", suffixes=("_a", "_b"))
    pairs = pairs[pairs["rater_a"] < pairs["rater_b"]]
    return pairs.rename(columns={"rater_a": "a", "rater_b": "b"}).reset_index(drop=True)


def pairwise_exact(pairs: pd.DataFrame, column: str) -> float | None:
    """Mean over pairs of the share of (given) co-rated items on which the pair agrees."""
    if len(pairs) == 0:
        return None
    agree = (pairs[f"{column}_a"] == pairs[f"{column}_b"]).astype(np.float64)
    per_pair = agree.groupby([pairs["a"], pairs["b"]]).mean()
    return float(per_pair.mean())


def pairwise_kappa(pairs: pd.DataFrame, column: str, raters: list[str]) -> dict[str, float | None]:
    """Cohen's κ for every pair of raters (``"<a>__<b>"``) and their ``mean``."""
    from sklearn.metrics import cohen_kappa_score

    groups = {k: g for k, g in pairs.groupby(["a", "b"], sort=True)}
    out: dict[str, float | None] = {}
    for a, b in combinations(range(len(raters)), 2):
        g = groups.get((a, b))
        kappa = None
        if g is not None and len(g):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                kappa = _finite(cohen_kappa_score(g[f"{column}_a"].to_numpy(), g[f"{column}_b"].to_numpy()))
        out[f"{raters[a]}__{raters[b]}"] = kappa
    out["mean"] = _nanmean(v for k, v in out.items())
    return out


def pairwise_accuracy(pairs: pd.DataFrame) -> tuple[float | None, float | None]:
    """(accuracy, balanced accuracy) of raters against each other, pair by pair, binary."""
    from sklearn.metrics import balanced_accuracy_score

    accs, bals = [], []
    for _, g in pairs.groupby(["a", "b"], sort=True):
        x, y = g["binary_a"].to_numpy(), g["binary_b"].to_numpy()
        accs.append(float(np.mean(x == y)))
        for truth, pred in ((x, y), (y, x)):
            if truth.min() != truth.max():  # truth has both classes
                bals.append(float(balanced_accuracy_score(truth, pred)))
    return _nanmean(accs), _nanmean(bals)


# ---------------------------------------------------------------------------------------------
# panel statistics


def complete_matrix(votes: pd.DataFrame, column: str, n_per_item: int = 3) -> np.ndarray:
    """items × n matrix of the votes of items with exactly ``n_per_item`` raters."""
    n = votes.groupby("item")["item"].transform("size")
    sub = votes[n == n_per_item].sort_values(["item", "rater"], kind="stable")
    return sub[column].to_numpy().reshape(-1, n_per_item)


def exact_agreement(matrix: np.ndarray) -> float | None:
    if len(matrix) == 0:
        return None
    return float(np.mean((matrix == matrix[:, :1]).all(axis=1)))


def fleiss(matrix: np.ndarray) -> float | None:
    """Fleiss' κ of an items × raters matrix with every cell filled (statsmodels)."""
    if len(matrix) == 0:
        return None
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    table, _ = aggregate_raters(matrix)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _finite(fleiss_kappa(table, method="fleiss"))


def krippendorff_alpha(votes: pd.DataFrame, column: str, n_values: int, level: str) -> float | None:
    """Krippendorff's α over items with ≥2 raters (missing cells allowed)."""
    n = votes.groupby("item")["item"].transform("size")
    sub = votes[n >= 2]
    if sub["item"].nunique() < 1:
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
    g = votes.groupby("item")["binary"]
    n = g.transform("size").to_numpy()
    ones = g.transform("sum").to_numpy()
    v = votes["binary"].to_numpy()
    other_ones = ones - v
    other_zeros = (n - 1) - other_ones
    keep = (n >= 3) & (other_ones != other_zeros)
    return pd.DataFrame(
        {
            "item": votes["item"].to_numpy()[keep],
            "truth": (other_ones > other_zeros).astype(np.int64)[keep],
            "pred": v[keep],
        }
    )


def loo_agreement(votes: pd.DataFrame) -> tuple[float | None, float | None, float]:
    """(accuracy, balanced accuracy, comparisons used) of leave-one-out agreement."""
    from sklearn.metrics import balanced_accuracy_score

    comp = loo_comparisons(votes)
    if len(comp) == 0:
        return None, None, 0.0
    truth, pred = comp["truth"].to_numpy(), comp["pred"].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bal = balanced_accuracy_score(truth, pred)
    return float(np.mean(truth == pred)), _finite(bal), float(len(comp))


# ---------------------------------------------------------------------------------------------
# bootstrap [ours]


def bootstrap_pairwise_accuracy(pairs: pd.DataFrame, seed: int, draws: int) -> list[float] | None:
    """95 % percentile interval of the pairwise accuracy, resampling co-rated items."""
    if len(pairs) == 0:
        return None
    from scipy import sparse

    item_codes, items = pd.factorize(pairs["item"], sort=True)
    pair_codes, _ = pd.factorize(pairs["a"].astype(np.int64) * 1_000_003 + pairs["b"], sort=True)
    shape = (len(items), int(pair_codes.max()) + 1)
    agree = (pairs["binary_a"] == pairs["binary_b"]).to_numpy(dtype=np.float64)
    n_mat = sparse.csr_matrix((np.ones(len(pairs)), (item_codes, pair_codes)), shape=shape)
    a_mat = sparse.csr_matrix((agree, (item_codes, pair_codes)), shape=shape)
    if shape[1] <= 64:  # few pairs: dense BLAS is faster than a sparse product
        n_mat, a_mat = n_mat.toarray(), a_mat.toarray()
    stats = []
    for n, a in bootstrap_sums([n_mat, a_mat], draws, seed):
        with np.errstate(invalid="ignore", divide="ignore"):
            stats.append(np.nanmean(np.where(n > 0, a / n, np.nan), axis=1))
    return percentile_interval(np.concatenate(stats))


def bootstrap_loo_accuracy(votes: pd.DataFrame, seed: int, draws: int) -> list[float] | None:
    """95 % percentile interval of the leave-one-out accuracy, resampling items."""
    comp = loo_comparisons(votes)
    if len(comp) == 0:
        return None
    per_item = comp.assign(correct=(comp["truth"] == comp["pred"]).astype(np.float64)).groupby("item")
    counts = np.column_stack([per_item.size().to_numpy(np.float64), per_item["correct"].sum().to_numpy()])
    stats = [correct[:, 0] / used[:, 0] for used, correct in bootstrap_sums([counts[:, :1], counts[:, 1:]], draws, seed)]
    return percentile_interval(np.concatenate(stats))


# ---------------------------------------------------------------------------------------------
# the summary blocks


def human_agreement(votes: pd.DataFrame, raters: list[str], ordinal: bool, n_values: int,
                    seed: int = BOOTSTRAP_SEED, draws: int = BOOTSTRAP_DRAWS) -> dict:
    """``summary.json["agreement"]`` for one subset, keys in the upstream order."""
    cols = ("binary", "value") if ordinal else ("binary",)
    pairs = co_rated_pairs(votes, cols)
    n_raters = votes.groupby("item")["item"].transform("size")
    complete_items = votes.loc[n_raters == 3, "item"].unique()
    cpairs = pairs[pairs["item"].isin(complete_items)]
    bin3 = complete_matrix(votes, "binary")
    a: dict = {}
    if ordinal:
        a["exact_3way_ordinal"] = exact_agreement(complete_matrix(votes, "value"))
    a["exact_3way_binary"] = exact_agreement(bin3)
    a["pairwise_exact_binary"] = pairwise_exact(cpairs, "binary")
    if ordinal:
        a["pairwise_exact_ordinal"] = pairwise_exact(cpairs, "value")
        a["pairwise_ordinal_kappa"] = pairwise_kappa(cpairs, "value", raters)
    a["pairwise_binary_kappa"] = pairwise_kappa(cpairs, "binary", raters)
    if ordinal:
        a["fleiss_ordinal_kappa"] = fleiss(complete_matrix(votes, "value"))
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
    a["human_pairwise_accuracy_ci95"] = bootstrap_pairwise_accuracy(pairs, seed, draws)
    a["human_loo_accuracy_ci95"] = bootstrap_loo_accuracy(votes, seed, draws)
    return a


def augmented_agreement(votes: pd.DataFrame, items: pd.DataFrame) -> dict:
    """``summary.json["augmented_agreement"]``: the panel plus the sampling-prior rater.

    ``items`` is the per-item table (``n_raters``, ``intended``, ``majority_present``,
    ``majority_present_tie``) indexed by item code. The synthetic rater votes the sampling
    prior on every item with ≥2 human raters; it is derived from the sampling design, not from
    any model output.
    """
    from sklearn.metrics import balanced_accuracy_score

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
    if len(decided):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g_bal = _finite(balanced_accuracy_score(truth, pred))
        g_acc = float(np.mean(truth == pred))
    else:
        g_acc = g_bal = None
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
