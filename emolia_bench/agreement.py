"""Inter-rater agreement and the human upper bound (README: “2. analysis.py”; the definitions below).

Input everywhere is a long frame of cleaned votes with integer columns ``item``, ``rater``,
``binary`` and (ordinal subsets) ``value``: one row per item and rater. Rater codes follow the
sorted rater names, so ``a < b`` in codes is ``a < b`` in names.

Definitions and undefined cases (undefined -> ``None``, written as JSON ``null``):

* complete item: rated by exactly 3 raters (upstream's rule), or by every rater present when
  fewer than three are (after ``--exclude-raters``: excluding one of three leaves the other two's
  figures; upstream's rule would leave none). :func:`panel_size` gives the number; panels of
  three or more keep upstream's figures exactly. With one rater nothing is complete.
* ``exact_3way`` (upstream's name): share of complete items whose ratings are all equal; None
  without complete items.
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
* leave-one-out: on items with ≥3 votes (≥2 when only two raters are present), every vote
  against the majority of the item's other votes; ties among the others are skipped; pooled. Its
  balanced accuracy is the mean of the recalls on truth 1 and truth 0 — None when the truth has
  one class, where upstream writes NaN; the sampling prior's agreement with the consensus
  likewise.
* Krippendorff's α [ours]: over all items with ≥2 raters (``krippendorff`` package); None when
  fewer than one such item or no variation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from .defaults import MIN_ITEMS
from .metrics import balanced_accuracy_from_sums, binary_metrics
from .resampling import Bootstrap, group_sums, percentile_interval
from .summary import Figure, Support

PRESELECT_RATER = "gemini3flash_preselect"
PRESELECTION_MIN_HUMANS = 2
UPSTREAM_COMPLETE = 3


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


def pair_codes(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The one rater-pair encoding: ``(code, a, b)`` with each row's pair code 0..P-1 (pairs in
    (a, b) order) and each pair's two raters."""
    a, b = pairs["a"].to_numpy(np.int64), pairs["b"].to_numpy(np.int64)
    width = int(b.max()) + 1 if len(b) else 1
    code, uniq = pd.factorize(a * width + b, sort=True)
    return code.astype(np.int64), uniq // width, uniq % width


def pair_cells(pairs: pd.DataFrame, column: str, n_values: int) -> tuple[np.ndarray, int]:
    """Each row's cell of its pair's ``n_values × n_values`` table of (A's vote, B's vote), as one
    code over all pairs' tables; and the number of pairs."""
    code, a, _ = pair_codes(pairs)
    cell = (code * n_values + pairs[f"{column}_a"].to_numpy(np.int64)) * n_values + pairs[f"{column}_b"].to_numpy(np.int64)
    return cell, len(a)


def pair_tables(pairs: pd.DataFrame, column: str, n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rater pair, the n_values × n_values contingency table of (A's vote, B's vote):
    ``(a, b, tables)`` for the pairs that co-rated at least one of the given items, sorted by (a, b)."""
    if len(pairs) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, n_values, n_values))
    _, a, b = pair_codes(pairs)
    cell, n_pairs = pair_cells(pairs, column, n_values)
    tables = np.bincount(cell, minlength=n_pairs * n_values**2).reshape(n_pairs, n_values, n_values)
    return a, b, tables.astype(np.float64)


def pairwise_exact(pairs: pd.DataFrame, column: str, n_values: int = 2) -> float | None:
    """Mean over pairs of the share of (given) co-rated items on which the pair agrees."""
    _, _, t = pair_tables(pairs, column, n_values)
    if len(t) == 0:
        return None
    return float(np.mean(np.trace(t, axis1=1, axis2=2) / t.sum(axis=(1, 2))))


def pairwise_kappa(pairs: pd.DataFrame, column: str, raters: list[str], n_values: int = 2) -> dict[str, float | None]:
    """Cohen's κ (unweighted, :func:`kappas_from_tables`) for every pair of raters
    (``"<a>__<b>"``; None for a pair without a shared item or with p_e = 1) and their ``mean``
    over the defined pairs."""
    a, b, tables = pair_tables(pairs, column, n_values)
    by_pair = dict(zip(zip(a.tolist(), b.tolist(), strict=True), kappas_from_tables(tables), strict=True))
    out: dict[str, float | None] = {}
    for i, j in combinations(range(len(raters)), 2):
        out[f"{raters[i]}__{raters[j]}"] = _finite(by_pair.get((i, j)))
    out["mean"] = _nanmean(out.values())
    return out


def pairwise_accuracy(pairs: pd.DataFrame) -> tuple[float | None, float | None]:
    """(accuracy, balanced accuracy) of raters against each other, pair by pair, binary.

    Accuracy: the mean over pairs of each pair's agreements / co-rated items, the statistic of
    :func:`pairwise_accuracy_resampled` at weight 1 (its intervals' function). From each pair's
    2 × 2 table t[A's vote, B's vote], balanced accuracy with A as truth = (t11/(t10+t11) + t00/(t00+t01)) / 2, kept only when A used both
    classes, and likewise with B as truth (the columns). Tests check both against
    scikit-learn's balanced_accuracy_score.
    """
    _, _, t = pair_tables(pairs, "binary", 2)
    if len(t) == 0:
        return None, None
    acc = point_values([pairwise_accuracy_resampled(pairs)])["human_pairwise_accuracy"]
    bals = []
    for tt in (t, t.transpose(0, 2, 1)):  # A as truth (rows), then B as truth
        pos, neg = tt[:, 1, :].sum(1), tt[:, 0, :].sum(1)
        both = (pos > 0) & (neg > 0)
        bals.append(balanced_accuracy_from_sums(tt[both, 1, 1], pos[both], tt[both, 0, 0], neg[both]))
    kept = np.concatenate(bals)
    return acc, (float(kept.mean()) if len(kept) else None)


# ---------------------------------------------------------------------------------------------
# panel statistics


def votes_per_item(votes: pd.DataFrame) -> np.ndarray:
    """For each vote, how many votes its item has (item codes are non-negative integers)."""
    item = votes["item"].to_numpy(np.int64)
    return np.bincount(item)[item]


def panel_size(votes: pd.DataFrame) -> int:
    """How many raters a complete item has: three (upstream's), or every rater present in
    ``votes`` when fewer than three are; 0 with one rater (nothing is complete)."""
    present = int(votes["rater"].nunique())
    return min(UPSTREAM_COMPLETE, present) if present >= 2 else 0


def complete_matrix(votes: pd.DataFrame, column: str, n_per_item: int) -> np.ndarray:
    """items × n matrix of the votes of items with exactly ``n_per_item`` raters, rows in item
    order and columns in rater order."""
    if n_per_item < 1:
        return np.empty((0, 0), dtype=votes[column].dtype)
    keep = votes_per_item(votes) == n_per_item
    item, rater = votes["item"].to_numpy()[keep], votes["rater"].to_numpy()[keep]
    order = np.lexsort((rater, item))  # (item, rater) is unique: one vote per rater and item
    return votes[column].to_numpy()[keep][order].reshape(-1, n_per_item)


def exact_agreement(matrix: np.ndarray) -> float | None:
    if len(matrix) == 0:
        return None
    return float(np.mean((matrix == matrix[:, :1]).all(axis=1)))


def fleiss(matrix: np.ndarray) -> float | None:
    """Fleiss' κ of an items × raters matrix with every cell filled (:func:`fleiss_from_sums`,
    the function its resamples use); None without items or when every vote is the same."""
    if len(matrix) == 0:
        return None
    figure = fleiss_resampled({"fleiss": (matrix, int(matrix.max()) + 1)}, np.arange(len(matrix)))
    return point_values([figure])["fleiss"]


def krippendorff_alpha(votes: pd.DataFrame, column: str, n_values: int, level: str) -> float | None:
    """Krippendorff's α over items with ≥2 raters (missing cells allowed; :func:`alpha_from_coincidences`,
    the function its resamples use); None without such items or without variation."""
    figure = alpha_resampled(votes, {"alpha": (column, n_values, level)})
    return None if figure is None else point_values([figure])["alpha"]


def loo_comparisons(votes: pd.DataFrame) -> pd.DataFrame:
    """Every vote of an item with at least as many votes as a complete item (:func:`panel_size`:
    3, or 2 when only two raters are present) against the majority of the item's other votes.

    Returns ``item, rater, truth, pred`` for the comparisons used (others' ties skipped).
    """
    item, v = votes["item"].to_numpy(np.int64), votes["binary"].to_numpy(np.int64)
    n = votes_per_item(votes)
    ones = np.bincount(item, weights=v)[item].astype(np.int64)
    other_ones = ones - v
    other_zeros = (n - 1) - other_ones
    keep = (n >= max(2, panel_size(votes))) & (other_ones != other_zeros)
    return pd.DataFrame(
        {
            "item": item[keep],
            "rater": votes["rater"].to_numpy(np.int64)[keep],
            "truth": (other_ones > other_zeros).astype(np.int64)[keep],
            "pred": v[keep],
        }
    )


def loo_agreement(votes: pd.DataFrame) -> tuple[float | None, float | None, float]:
    """(accuracy, balanced accuracy, comparisons used) of leave-one-out agreement; the accuracy is
    :func:`loo_accuracy_resampled`'s statistic at weight 1."""
    comp = loo_comparisons(votes)
    if len(comp) == 0:
        return None, None, 0.0
    truth, pred = comp["truth"].to_numpy(), comp["pred"].to_numpy()
    accuracy = point_values([loo_accuracy_resampled(votes, comp=comp)])["human_loo_accuracy"]
    return accuracy, binary_metrics(truth, pred)["balanced_accuracy"], float(len(comp))


# ---------------------------------------------------------------------------------------------
# bootstrap [ours]


@dataclass(frozen=True)
class Resampled:
    """Figures computed from grouped sums of per-item counts, for :func:`point_values` and
    :func:`intervals`: rows ``(unit, group, values…)`` over ``n_units`` items (``unit``: each
    row's item position 0..n_units-1), ``n_groups`` groups, the figures' ``names``, and
    ``statistic``: grouped sums of a chunk of resamples -> a ``chunk × len(names)`` array."""

    n_units: int
    unit: np.ndarray
    group: np.ndarray
    values: list
    n_groups: int
    names: list
    statistic: Callable


def point_values(figures: list[Resampled | None]) -> dict[str, float | None]:
    """Each named figure on the data as they are: its statistic at weight 1 for every item
    (the very function its resamples go through); None where undefined."""
    out = {}
    for f in figures:
        if f is not None:
            sums = group_sums(f.unit, f.group, f.values, f.n_units, f.n_groups)(np.ones((1, f.n_units)))
            out.update({name: _finite(v) for name, v in zip(f.names, np.reshape(f.statistic(sums), -1), strict=True)})
    return out


def intervals(figures: list[Resampled | None], bootstrap: Bootstrap) -> dict[str, list[float] | None]:
    """95 % percentile intervals of every named figure, resampling its items
    (:class:`resampling.Bootstrap`; figures over the same items see the same resamples)."""
    out: dict[str, list[float] | None] = {}
    for f in figures:
        if f is not None:
            stats = bootstrap.grouped(lambda sums, f=f: np.asarray(f.statistic(sums)).reshape(len(sums[0]), -1),
                                      unit=f.unit, group=f.group, values=f.values, n_units=f.n_units,
                                      n_groups=f.n_groups)
            for j, name in enumerate(f.names):
                out[name] = percentile_interval(stats[:, j]) if len(stats) else None
    return out


def _mean_agreement(sums) -> np.ndarray:
    n, a = sums[0], sums[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nanmean(np.where(n > 0, a / n, np.nan), axis=1)


def pairwise_accuracy_resampled(pairs: pd.DataFrame, name: str = "human_pairwise_accuracy") -> Resampled | None:
    """The pairwise accuracy for the bootstrap; units are the co-rated items. Per resample and
    pair: co-rated items drawn (with multiplicity) and agreements among them; the statistic is
    the mean over pairs with at least one drawn item of agreements / items (upstream's figure),
    and ``<name>_items_weighted`` the pooled agreements / comparisons, which weights each pair
    by its shared items. None without pairs."""
    if len(pairs) == 0:
        return None
    item_codes, items = pd.factorize(pairs["item"], sort=True)
    pair, a, _ = pair_codes(pairs)
    agree = (pairs["binary_a"] == pairs["binary_b"]).to_numpy(dtype=np.float64)

    def statistic(sums):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.column_stack([_mean_agreement(sums), sums[1].sum(axis=1) / sums[0].sum(axis=1)])

    return Resampled(len(items), item_codes, pair, [np.ones(len(pairs)), agree], len(a),
                     [name, f"{name}_items_weighted"], statistic)


def loo_accuracy_resampled(votes: pd.DataFrame, name: str = "human_loo_accuracy",
                           comp: pd.DataFrame | None = None) -> Resampled | None:
    """The leave-one-out accuracy for the bootstrap; units are the items with a comparison, the
    statistic the pooled share of correct comparisons. None without comparisons. ``comp``: the
    :func:`loo_comparisons` of ``votes`` when the caller has them already."""
    comp = loo_comparisons(votes) if comp is None else comp
    if len(comp) == 0:
        return None
    item_codes, items = pd.factorize(comp["item"], sort=True)
    correct = (comp["truth"] == comp["pred"]).to_numpy(dtype=np.float64)
    return Resampled(len(items), item_codes, np.zeros(len(comp), np.int64), [np.ones(len(comp)), correct], 1, [name],
                     lambda sums: sums[1][:, 0] / sums[0][:, 0])


# ---------------------------------------------------------------------------------------------
# chance-corrected agreement from count tables, for the point estimates' intervals [ours]
#
# Each statistic below is a function of sums of per-item integer counts, so the bootstrap of
# :mod:`resampling` applies; tests check each against its library (statsmodels, krippendorff,
# scikit-learn) on the unresampled data and against an explicit resample of items.


def kappas_from_tables(t: np.ndarray, quadratic: bool = False) -> np.ndarray:
    """Cohen's κ of each ``… × V × V`` contingency table (rows: rater A, columns: rater B):
    κ = (p_o − p_e) / (1 − p_e), unweighted; with ``quadratic`` the weighted form
    1 − Σ w·o / Σ w·e with w_ij = (i − j)² (scikit-learn's ``weights="quadratic"``). NaN where
    undefined (no items, or chance agreement 1: both raters constant and equal)."""
    n = t.sum(axis=(-2, -1))
    rows, cols = t.sum(axis=-1), t.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[..., :, None] * cols[..., None, :] / n[..., None, None]
        if quadratic:
            v = t.shape[-1]
            w = (np.arange(v)[:, None] - np.arange(v)[None, :]) ** 2.0
            observed_d, expected_d = (w * t).sum(axis=(-2, -1)), (w * expected).sum(axis=(-2, -1))
            kappa = 1 - observed_d / expected_d
            return np.where(expected_d > 0, kappa, np.nan)
        po = np.trace(t, axis1=-2, axis2=-1) / n
        pe = np.trace(expected, axis1=-2, axis2=-1) / n
        return np.where((n > 0) & (pe < 1), (po - pe) / (1 - pe), np.nan)


def mean_kappas(t: np.ndarray, quadratic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(unweighted mean over pairs, mean weighted by each pair's items) of the defined κ of
    ``… × pairs × V × V`` tables."""
    k = kappas_from_tables(t, quadratic)
    n = np.where(np.isfinite(k), t.sum(axis=(-2, -1)), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no defined pair: NaN, dropped later
        return np.nanmean(k, axis=-1), np.nansum(np.where(n > 0, k * n, 0), axis=-1) / n.sum(-1)


def kappa_resampled(pairs: pd.DataFrame, column: str, n_values: int, name: str,
                    quadratic_name: str | None = None) -> Resampled | None:
    """Mean pairwise Cohen's κ (and its items-weighted mean; with ``quadratic_name`` also the
    quadratic-weighted κ's) for the bootstrap; units are the items of ``pairs``; each (pair,
    cell of the pair's table) is a group. None without pairs."""
    if len(pairs) == 0:
        return None
    item_codes, items = pd.factorize(pairs["item"], sort=True)
    cell, n_pairs = pair_cells(pairs, column, n_values)
    names = [name, f"{name}_items_weighted"] + ([quadratic_name, f"{quadratic_name}_items_weighted"] if quadratic_name else [])

    def statistic(sums):
        t = sums[0].reshape(len(sums[0]), n_pairs, n_values, n_values)
        out = list(mean_kappas(t))
        if quadratic_name:
            out += list(mean_kappas(t, quadratic=True))
        return np.column_stack(out)

    return Resampled(len(items), item_codes, cell, [np.ones(len(pairs))], n_pairs * n_values**2, names, statistic)


def fleiss_from_sums(n_items, category_counts: np.ndarray, sq_excess, n_raters: int) -> np.ndarray:
    """Fleiss' κ from sums over items of 1, of each category's count n_ij and of
    Σ_j n_ij² − n (n raters per item): p_j = Σ n_ij / (N n), P̄ = Σ (Σ_j n_ij² − n) / (N n (n−1)),
    κ = (P̄ − Σ p_j²) / (1 − Σ p_j²); NaN when undefined (no items, or one category only)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = category_counts / (n_items[..., None] * n_raters)
        pe = (p**2).sum(axis=-1)
        pbar = sq_excess / (n_items * n_raters * (n_raters - 1))
        return np.where(pe < 1, (pbar - pe) / (1 - pe), np.nan)


def fleiss_resampled(matrices: dict[str, tuple[np.ndarray, int]], items: np.ndarray) -> Resampled | None:
    """Fleiss' κ of one or more complete items × raters matrices over the same ``items`` (name ->
    (matrix, number of categories)); one row per item."""
    if len(items) == 0:
        return None
    values, spans = [np.ones(len(items))], []
    for matrix, n_categories in matrices.values():
        counts = np.stack([(matrix == c).sum(axis=1) for c in range(n_categories)], axis=1).astype(np.float64)
        spans.append((len(values), n_categories, matrix.shape[1]))
        values += [counts[:, c] for c in range(n_categories)] + [(counts**2).sum(axis=1) - matrix.shape[1]]

    def statistic(sums):
        n = sums[0][:, 0]
        return np.column_stack([
            fleiss_from_sums(n, np.column_stack([sums[j + c][:, 0] for c in range(k)]), sums[j + k][:, 0], m)
            for j, k, m in spans])

    return Resampled(len(items), np.arange(len(items)), np.zeros(len(items), np.int64), values, 1, list(matrices), statistic)


def alpha_from_coincidences(o: np.ndarray, level: str) -> np.ndarray:
    """Krippendorff's α from ``… × V × V`` coincidence matrices: α = 1 − (n − 1) Σ o·δ / Σ n_c n_k δ
    with δ nominal ([c ≠ k]) or ordinal ((Σ_{g=c..k} n_g − (n_c + n_k)/2)², from the margins);
    NaN when undefined (fewer than two pairable values, or a single value used)."""
    v = o.shape[-1]
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    if level == "nominal":
        delta = np.broadcast_to(1.0 - np.eye(v), o.shape)
    else:
        cum = np.cumsum(n_c, axis=-1)
        lo, hi = np.minimum.outer(np.arange(v), np.arange(v)), np.maximum.outer(np.arange(v), np.arange(v))
        span = cum[..., hi] - np.where(lo > 0, cum[..., np.maximum(lo - 1, 0)], 0)
        delta = (span - (n_c[..., :, None] + n_c[..., None, :]) / 2) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        d_o = (o * delta).sum(axis=(-2, -1))
        d_e = (n_c[..., :, None] * n_c[..., None, :] * delta).sum(axis=(-2, -1))
        return np.where(d_e > 0, 1 - (n - 1) * d_o / d_e, np.nan)


def alpha_resampled(votes: pd.DataFrame, columns: dict[str, tuple[str, int, str]]) -> Resampled | None:
    """Krippendorff's α over items with ≥2 raters for the bootstrap (name -> (vote column,
    number of values, level)); each item's coincidence matrix, scaled by L = lcm(m − 1) over
    its items so that every count is an integer, is one set of V × V groups."""
    sub = votes[votes_per_item(votes) >= 2]
    if len(sub) == 0:
        return None
    item_codes, items = pd.factorize(sub["item"], sort=True)
    m = np.bincount(item_codes)
    scale = math.lcm(*(int(x) - 1 for x in np.unique(m)))
    units, groups, vals, spans = [], [], [], []
    offset = 0
    for column, n_values, _ in columns.values():
        counts = np.zeros((len(items), n_values))
        np.add.at(counts, (item_codes, sub[column].to_numpy(np.int64)), 1)
        # o_ck of an item: (n_c n_k − [c = k] n_c) / (m − 1), times L
        o = (counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(n_values)) * (scale // (m - 1))[:, None, None]
        u, c = np.nonzero(o.reshape(len(items), -1))
        units.append(u)
        groups.append(offset + c)
        vals.append(o.reshape(len(items), -1)[u, c])
        spans.append((offset, n_values))
        offset += n_values**2
    levels = [level for _, _, level in columns.values()]

    def statistic(sums):
        s = sums[0] / scale
        return np.column_stack([alpha_from_coincidences(s[:, o:o + v * v].reshape(-1, v, v), level)
                                for (o, v), level in zip(spans, levels, strict=True)])

    return Resampled(len(items), np.concatenate(units), np.concatenate(groups), [np.concatenate(vals)], offset,
                     list(columns), statistic)


# ---------------------------------------------------------------------------------------------
# every figure with its support, its interval and whether it can be trusted [ours]

INTERVAL_NOTE = ("95 % percentile bootstrap over items, raters held fixed: the intervals are conditional on "
                 "these raters and say nothing about how another panel would agree")


def pair_kappas(pairs: pd.DataFrame, raters: list[str], ordinal: bool, n_values: int, support: Support) -> list[dict]:
    """Per rater pair on the given (complete) items: items shared, Cohen's κ binary and, for
    ordinal subsets, unweighted and quadratic-weighted ordinal κ; ``reliable``: the pair shares
    enough items (``support``)."""
    out = []
    a, b, tables = pair_tables(pairs, "binary", 2)
    ordinal_tables = pair_tables(pairs, "value", n_values)[2] if ordinal else None
    for j, (i, k) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        row = {"pair": f"{raters[i]}__{raters[k]}", "n_items": int(tables[j].sum()),
               "kappa_binary": _finite(kappas_from_tables(tables[j]))}
        if ordinal:
            row["kappa_ordinal"] = _finite(kappas_from_tables(ordinal_tables[j]))
            row["kappa_ordinal_quadratic"] = _finite(kappas_from_tables(ordinal_tables[j], quadratic=True))
        row["reliable"] = support.reliable(row["n_items"])
        out.append(row)
    return out


class Panel:
    """What every agreement figure of one panel is computed from, derived once: the co-rated
    pairs (with ordinal votes for an ordinal subset), the complete items (:func:`panel_size`)
    and their pairs, and the complete items × raters matrices."""

    def __init__(self, votes: pd.DataFrame, ordinal: bool):
        self.votes, self.ordinal = votes, ordinal
        self.pairs = co_rated_pairs(votes, ("binary", "value") if ordinal else ("binary",))
        self.size = panel_size(votes)
        self.complete_items = np.unique(votes.loc[votes_per_item(votes) == self.size, "item"].to_numpy())
        self.cpairs = self.pairs[self.pairs["item"].isin(self.complete_items)]
        self.bin3 = complete_matrix(votes, "binary", self.size)
        self.val3 = complete_matrix(votes, "value", self.size) if ordinal else None


def agreement_figures(panel: Panel, n_values: int) -> list[Resampled | None]:
    """Every agreement figure that has an interval, as :class:`Resampled` figures: the pairwise
    and leave-one-out accuracy (the ceiling), the mean pairwise κ and its items-weighted mean,
    Fleiss' κ and Krippendorff's α (binary; ordinal ones too for an ordinal subset)."""
    votes, ordinal = panel.votes, panel.ordinal
    pairs, complete_items, cpairs = panel.pairs, panel.complete_items, panel.cpairs
    matrices = {"fleiss_binary_kappa": (panel.bin3, 2)}
    alphas = {"krippendorff_alpha_binary": ("binary", 2, "nominal")}
    if ordinal:
        matrices["fleiss_ordinal_kappa"] = (panel.val3, n_values)
        alphas["krippendorff_alpha_ordinal"] = ("value", n_values, "ordinal")
    figures = [pairwise_accuracy_resampled(pairs), loo_accuracy_resampled(votes),
               kappa_resampled(cpairs, "binary", 2, "pairwise_binary_kappa_mean"),
               fleiss_resampled(matrices, complete_items), alpha_resampled(votes, alphas)]
    if ordinal:
        figures.append(kappa_resampled(cpairs, "value", n_values, "pairwise_ordinal_kappa_mean",
                                       "pairwise_ordinal_kappa_quadratic_mean"))
    return figures


def agreement_detail(panel: Panel, raters: list[str], n_values: int, agreement: dict, ci: dict,
                     min_items: int = MIN_ITEMS) -> dict:
    """``summary.json["agreement_detail"]``: each figure of ``agreement`` (and the items-weighted
    pairwise means beside upstream's unweighted ones) with its value, its 95 % interval (from
    ``ci``, :func:`intervals` of :func:`agreement_figures`), the items and comparisons it rests on, and
    ``reliable`` = at least ``min_items`` items; the per-pair κ table. Comparisons: rater pairs
    within items (pairwise figures, κ, α), or held-out votes (LOO).
    """
    votes, ordinal = panel.votes, panel.ordinal
    pairs, complete_items, cpairs = panel.pairs, panel.complete_items, panel.cpairs
    multi = votes[votes_per_item(votes) >= 2]
    m = np.bincount(pd.factorize(multi["item"])[0]) if len(multi) else np.empty(0, np.int64)
    comp = loo_comparisons(votes)
    complete = f"items rated by {panel.size} raters (complete)"

    # point values of the figures that agreement does not hold
    _, _, t = pair_tables(cpairs, "binary", 2)
    values = {"pairwise_binary_kappa_mean_items_weighted": mean_kappas(t)[1] if len(t) else None}
    if ordinal:
        _, _, t3 = pair_tables(cpairs, "value", n_values)
        values["pairwise_ordinal_kappa_mean_items_weighted"] = mean_kappas(t3)[1] if len(t3) else None
        values["pairwise_ordinal_kappa_quadratic_mean"], values["pairwise_ordinal_kappa_quadratic_mean_items_weighted"] = (
            mean_kappas(t3, quadratic=True) if len(t3) else (None, None))
    values["human_pairwise_accuracy_items_weighted"] = point_values([pairwise_accuracy_resampled(pairs)]).get(
        "human_pairwise_accuracy_items_weighted")

    n_complete, n_cpairs, n_cp_items = len(complete_items), len(cpairs), cpairs["item"].nunique()
    support = {  # name -> (value, n items, n comparisons, unit)
        "exact_3way_binary": (agreement["exact_3way_binary"], n_complete, n_complete, complete),
        "pairwise_exact_binary": (agreement["pairwise_exact_binary"], n_cp_items, n_cpairs, complete),
        "pairwise_binary_kappa_mean": (agreement["pairwise_binary_kappa"]["mean"], n_cp_items, n_cpairs,
                                       complete),
        "pairwise_binary_kappa_mean_items_weighted": (values["pairwise_binary_kappa_mean_items_weighted"], n_cp_items,
                                                      n_cpairs, complete),
        "fleiss_binary_kappa": (agreement["fleiss_binary_kappa"], n_complete, panel.size * n_complete, complete),
        "krippendorff_alpha_binary": (agreement["krippendorff_alpha_binary"], len(m), int((m * (m - 1) // 2).sum()),
                                      "items rated by two or more raters"),
        "human_pairwise_accuracy": (agreement["human_pairwise_accuracy"], pairs["item"].nunique(), len(pairs),
                                    "items rated by two or more raters"),
        "human_pairwise_accuracy_items_weighted": (values["human_pairwise_accuracy_items_weighted"],
                                                   pairs["item"].nunique(), len(pairs), "items rated by two or more raters"),
        "human_pairwise_balanced_accuracy": (agreement["human_pairwise_balanced_accuracy"], pairs["item"].nunique(),
                                             len(pairs), "items rated by two or more raters"),
        "human_loo_accuracy": (agreement["human_loo_accuracy"], comp["item"].nunique(), len(comp),
                               "items with a leave-one-out comparison (three or more raters, or two when only two are present; the others not tied)"),
        "human_loo_balanced_accuracy": (agreement["human_loo_balanced_accuracy"], comp["item"].nunique(), len(comp),
                                        "items with a leave-one-out comparison (three or more raters, or two when only two are present; the others not tied)"),
    }
    if ordinal:
        unit = complete
        support.update({
            "exact_3way_ordinal": (agreement["exact_3way_ordinal"], n_complete, n_complete, unit),
            "pairwise_exact_ordinal": (agreement["pairwise_exact_ordinal"], n_cp_items, n_cpairs, unit),
            "pairwise_ordinal_kappa_mean": (agreement["pairwise_ordinal_kappa"]["mean"], n_cp_items, n_cpairs, unit),
            "pairwise_ordinal_kappa_mean_items_weighted": (values["pairwise_ordinal_kappa_mean_items_weighted"],
                                                           n_cp_items, n_cpairs, unit),
            "pairwise_ordinal_kappa_quadratic_mean": (values["pairwise_ordinal_kappa_quadratic_mean"], n_cp_items, n_cpairs, unit),
            "pairwise_ordinal_kappa_quadratic_mean_items_weighted": (
                values["pairwise_ordinal_kappa_quadratic_mean_items_weighted"], n_cp_items, n_cpairs, unit),
            "fleiss_ordinal_kappa": (agreement["fleiss_ordinal_kappa"], n_complete, panel.size * n_complete, unit),
            "krippendorff_alpha_ordinal": (agreement["krippendorff_alpha_ordinal"], len(m), int((m * (m - 1) // 2).sum()),
                                           "items rated by two or more raters"),
        })
    # unweighted means over rater pairs (upstream's figures): each pair weighs the same
    smallest = {"complete": _smallest_pair(cpairs), "all": _smallest_pair(pairs)}
    pair_means = {"pairwise_exact_binary": "complete", "pairwise_exact_ordinal": "complete",
                  "pairwise_binary_kappa_mean": "complete", "pairwise_ordinal_kappa_mean": "complete",
                  "pairwise_ordinal_kappa_quadratic_mean": "complete", "human_pairwise_accuracy": "all",
                  "human_pairwise_balanced_accuracy": "all"}
    return {
        "min_items": int(min_items),
        "intervals": INTERVAL_NOTE,
        "figures": {name: Figure.rated(_finite(v), ci.get(name), n, c, unit, Support(min_items),
                                       smallest[pair_means[name]] if name in pair_means else None).to_json()
                    for name, (v, n, c, unit) in support.items()},
        "pair_kappas": pair_kappas(cpairs, raters, ordinal, n_values, Support(min_items)),
    }


def _smallest_pair(pairs: pd.DataFrame) -> int:
    """The items shared by the rater pair sharing fewest (0 without pairs)."""
    if len(pairs) == 0:
        return 0
    code, _, _ = pair_codes(pairs)
    return int(np.bincount(code).min())


def agreement_by_slice(votes: pd.DataFrame, slice_of_item: pd.Series, ordinal: bool, n_values: int, *,
                       panel: int, bootstrap: Bootstrap, min_items: int = MIN_ITEMS) -> list[dict]:
    """Within each slice (e.g. task type): Krippendorff's α (binary; ordinal too) over the slice's
    items with ≥2 raters, with its item-bootstrap interval, and exact agreement over its items
    rated by all ``panel`` raters (complete, :func:`panel_size` of the subset); each with its
    items and ``reliable``. ``slice_of_item`` maps item code -> slice value. Slices in sorted
    order."""
    out = []
    item_slice = slice_of_item.reindex(votes["item"].to_numpy()).to_numpy()
    for value in sorted(pd.unique(slice_of_item.dropna())):
        v = votes[item_slice == value]
        n_votes = votes_per_item(v)
        multi = v[n_votes >= 2]
        n_multi = multi["item"].nunique()
        alphas = {"alpha_binary": ("binary", 2, "nominal")}
        if ordinal:
            alphas["alpha_ordinal"] = ("value", n_values, "ordinal")
        figure = [alpha_resampled(v, alphas)]
        point, ci = point_values(figure), intervals(figure, bootstrap)
        bin3 = complete_matrix(v, "binary", panel)
        row = {"slice": value, "n_items": int(v["item"].nunique()), "n_items_two_or_more_raters": int(n_multi),
               "alpha_binary": point.get("alpha_binary"), "alpha_binary_ci95": ci.get("alpha_binary")}
        if ordinal:
            row["alpha_ordinal"] = point.get("alpha_ordinal")
            row["alpha_ordinal_ci95"] = ci.get("alpha_ordinal")
        row["n_items_complete"] = int(len(bin3))
        row["exact_agreement_binary"] = exact_agreement(bin3)
        if ordinal:
            row["exact_agreement_ordinal"] = exact_agreement(complete_matrix(v, "value", panel))
        row["reliable"] = Support(min_items).reliable(n_multi)  # α's support: items with ≥2 raters
        row["exact_agreement_reliable"] = Support(min_items).reliable(row["n_items_complete"])
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------
# the summary blocks


def human_agreement(panel: Panel, raters: list[str], n_values: int, ci: dict) -> dict:
    """``summary.json["agreement"]`` for one subset, keys in the upstream order; the ceiling's
    intervals from ``ci`` (:func:`intervals` of :func:`agreement_figures`)."""
    votes, ordinal = panel.votes, panel.ordinal
    pairs, cpairs, bin3, val3 = panel.pairs, panel.cpairs, panel.bin3, panel.val3
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
    a["human_pairwise_accuracy_ci95"] = ci.get("human_pairwise_accuracy")
    a["human_loo_accuracy_ci95"] = ci.get("human_loo_accuracy")
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
    g_bal = binary_metrics(truth, pred)["balanced_accuracy"] if len(decided) else None
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
