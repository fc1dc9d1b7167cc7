"""Shared invariance tests, driven by a registry of every statistic with an interval.

Each entry names the package's computation of the figure (point value and clip- or
item-bootstrap interval) and an independent oracle from a maintained library, written from the
statistic's definition. Every entry must: equal its oracle on random data; give, resample by
resample, the oracle's value on an explicit resample of its units drawn with the same generator
(so its interval is that explicit percentile interval); be invariant to the order of the rows;
and be None where the statistic is undefined.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from emolia_bench import agreement as ag
from emolia_bench.ranking import auroc_with_intervals, spearman_with_interval
from emolia_bench.resampling import Bootstrap, percentile_interval

DRAWS, SEED = 60, 5


def panel(rng, n_items=40, n_raters=3, n_values=3) -> pd.DataFrame:
    """Every item rated by every rater (so each figure's units are all items)."""
    rows = [(i, r, int(rng.integers(0, n_values))) for i in range(n_items) for r in range(n_raters)]
    v = pd.DataFrame(rows, columns=["item", "rater", "value"])
    v["binary"] = (v["value"] >= 1).astype(np.int64)
    return v


def clip_rows(rng, n=90, n_clips=35) -> pd.DataFrame:
    truth = rng.integers(0, 2, n)
    return pd.DataFrame({"clip": [f"c{k:02d}" for k in rng.integers(0, n_clips, n)], "truth": truth,
                         "score": np.round(rng.normal(size=n) + 0.6 * truth, 1), "rating": rng.integers(0, 3, n) / 2})


def quiet(f):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        v = f()
    return None if v is None or not np.isfinite(v) else float(v)


# --- oracles, from the libraries ---------------------------------------------------------------

def oracle_kappa_mean(v):
    from sklearn.metrics import cohen_kappa_score

    m = v.pivot(index="item", columns="rater", values="binary").to_numpy()
    ks = [quiet(lambda i=i, j=j: cohen_kappa_score(m[:, i], m[:, j])) for i, j in ((0, 1), (0, 2), (1, 2))]
    ks = [k for k in ks if k is not None]
    return float(np.mean(ks)) if ks else None


def oracle_fleiss(v):
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    m = v.pivot(index="item", columns="rater", values="value").to_numpy()
    return quiet(lambda: fleiss_kappa(aggregate_raters(m)[0]))


def oracle_alpha(v):
    import krippendorff

    m = v.pivot(index="item", columns="rater", values="value").to_numpy().T.astype(float)
    try:
        return quiet(lambda: krippendorff.alpha(reliability_data=m, level_of_measurement="ordinal", value_domain=[0, 1, 2]))
    except ValueError:  # the library refuses data with one value only
        return None


def oracle_pairwise_accuracy(v):
    """Mean over rater pairs (with a shared item) of their agreement on the items both rated."""
    m = v.pivot(index="item", columns="rater", values="binary")
    shares = []
    for i, j in ((0, 1), (0, 2), (1, 2)):
        both = m.reindex(columns=[i, j]).dropna()
        if len(both):
            shares.append(np.mean(both[i] == both[j]))
    return float(np.mean(shares)) if shares else None


def oracle_auroc(d):
    from sklearn.metrics import roc_auc_score

    return roc_auc_score(d["truth"], d["score"]) if d["truth"].nunique() == 2 else None


def oracle_soft_auroc(d):
    """The vote fraction (``rating``: 0, 0.5, 1) as weights: each row once as a positive weighted q
    and once as a negative weighted 1 - q."""
    from sklearn.metrics import roc_auc_score

    q, s = d["rating"].to_numpy(), d["score"].to_numpy()
    if q.sum() == 0 or (1 - q).sum() == 0:
        return None
    return roc_auc_score(np.r_[np.ones(len(q)), np.zeros(len(q))], np.r_[s, s], sample_weight=np.r_[q, 1 - q])


def oracle_spearman(d):
    from scipy.stats import spearmanr

    return quiet(lambda: spearmanr(d["score"], d["rating"])[0])


# --- the registry ---------------------------------------------------------------------------------

@dataclass
class Statistic:
    name: str
    data: Callable  # rng -> data
    unit: str  # the column resampled: "item" or "clip"
    ours: Callable  # (data, bootstrap) -> (value, interval)
    oracle: Callable  # data -> value (None where undefined)
    undefined: Callable  # () -> data on which the statistic is undefined


def panel_figure(make, name):
    def ours(v, bootstrap):
        figure = make(v)
        return ag.point_values([figure]).get(name), ag.intervals([figure], bootstrap).get(name)
    return ours


def ranking(function, key):
    def ours(d, bootstrap):
        if key == "soft_auroc":
            r = auroc_with_intervals(d["rating"].to_numpy(), d["score"].to_numpy(), d["clip"].to_numpy(), np.zeros(len(d)),
                                     bootstrap=bootstrap)
            return r["auroc"], r["auroc_ci95"]
        if function is auroc_with_intervals:
            r = function(d["truth"].to_numpy(), d["score"].to_numpy(), d["clip"].to_numpy(), np.zeros(len(d)),
                         bootstrap=bootstrap)
            return r["auroc"], r["auroc_ci95"]
        r = function(d["score"].to_numpy(), d["rating"].to_numpy(), d["clip"].to_numpy(), bootstrap=bootstrap)
        return r["rho"], r["ci95"]
    return ours


def constant_panel():
    return panel(np.random.default_rng(0)).assign(value=1, binary=1)


REGISTRY = [
    Statistic("cohen_kappa_mean", panel, "item",
              panel_figure(lambda v: ag.kappa_resampled(ag.co_rated_pairs(v), "binary", 2, "k"), "k"),
              oracle_kappa_mean, constant_panel),
    Statistic("fleiss_kappa", panel, "item",
              panel_figure(lambda v: ag.fleiss_resampled({"f": (ag.complete_matrix(v, "value", 3), 3)},
                                                         np.unique(v["item"])), "f"),
              oracle_fleiss, constant_panel),
    Statistic("krippendorff_alpha_ordinal", panel, "item",
              panel_figure(lambda v: ag.alpha_resampled(v, {"a": ("value", 3, "ordinal")}), "a"),
              oracle_alpha, constant_panel),
    Statistic("pairwise_accuracy", panel, "item",
              panel_figure(lambda v: ag.pairwise_accuracy_resampled(ag.co_rated_pairs(v), "p"), "p"),
              oracle_pairwise_accuracy, lambda: panel(np.random.default_rng(0)).query("item % 3 == rater")),
    Statistic("auroc", clip_rows, "clip", ranking(auroc_with_intervals, "auroc"), oracle_auroc,
              lambda: clip_rows(np.random.default_rng(0)).assign(truth=1)),
    Statistic("soft_auroc", clip_rows, "clip", ranking(auroc_with_intervals, "soft_auroc"), oracle_soft_auroc,
              lambda: clip_rows(np.random.default_rng(0)).assign(rating=0.0)),
    Statistic("spearman", clip_rows, "clip", ranking(spearman_with_interval, "rho"), oracle_spearman,
              lambda: clip_rows(np.random.default_rng(0)).assign(rating=0.5)),
]
IDS = [s.name for s in REGISTRY]


def explicit_resample(data: pd.DataFrame, unit: str, counts: np.ndarray) -> pd.DataFrame:
    """The rows of every unit drawn, as often as drawn, each copy a new unit (items renumbered)."""
    units = np.sort(data[unit].unique())
    parts = []
    for k, u in enumerate(np.repeat(units, counts.astype(int))):
        part = data[data[unit] == u].copy()
        part[unit] = k if unit == "item" else f"u{k:04d}"
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("stat", REGISTRY, ids=IDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_equals_its_oracle(stat, seed):
    data = stat.data(np.random.default_rng(seed))
    value, _ = stat.ours(data, Bootstrap(draws=10, seed=SEED))
    assert value == pytest.approx(stat.oracle(data), abs=1e-12)


@pytest.mark.parametrize("stat", REGISTRY, ids=IDS)
def test_interval_equals_an_explicit_resample(stat):
    data = stat.data(np.random.default_rng(3))
    _, interval = stat.ours(data, Bootstrap(draws=DRAWS, seed=SEED))
    n = data[stat.unit].nunique()
    idx = np.random.default_rng(SEED).integers(0, n, size=(DRAWS, n), dtype=np.int32)  # the same draws
    values = [stat.oracle(explicit_resample(data, stat.unit, np.bincount(row, minlength=n))) for row in idx]
    want = percentile_interval(np.array([np.nan if v is None else v for v in values], dtype=float))
    assert interval == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("stat", REGISTRY, ids=IDS)
def test_invariant_to_row_order(stat):
    data = stat.data(np.random.default_rng(4))
    shuffled = data.sample(frac=1, random_state=7).reset_index(drop=True)
    bootstrap = Bootstrap(draws=DRAWS, seed=SEED)
    (v1, i1), (v2, i2) = stat.ours(data, bootstrap), stat.ours(shuffled, bootstrap)
    assert v2 == pytest.approx(v1, abs=1e-12) and i2 == pytest.approx(i1, abs=1e-12)


@pytest.mark.parametrize("stat", REGISTRY, ids=IDS)
def test_undefined_is_none(stat):
    data = stat.undefined()
    assert stat.oracle(data) is None  # the library agrees that there is nothing to report
    value, _ = stat.ours(data, Bootstrap(draws=20, seed=SEED))
    assert value is None
