"""Bootstrap resampling shared by the agreement ceiling and the model metrics.

Resampling is vectorised: each chunk of draws is a ``draws × units`` count matrix W (how often
each unit was drawn), and any per-unit statistic that is a sum becomes ``W @ M``.
"""

from __future__ import annotations

import numpy as np

# Cells of one chunk of resamples (2 MB of float64): small enough to stay in cache while the
# draws are counted; 1M cells made the benchmark's clip bootstrap 30 % slower here. Chunking
# never changes a result: the draws are the same stream however it is cut.
BUDGET = 1 << 18


def bootstrap_weights(n: int, draws: int, seed: int, budget: int = BUDGET, unit_type: np.ndarray | None = None):
    """Resample ``n`` units with replacement ``draws`` times; yield the ``chunk × n`` count
    matrices W (how often each unit was drawn in each resample), chunk by chunk.

    ``budget`` bounds W's size (see :data:`BUDGET`), so memory stays flat at any data size.
    With ``unit_type`` (each unit's type, 0..T-1) the counts are summed by type instead:
    ``chunk × T`` matrices of the very same resamples, for statistics in which units of one
    type are interchangeable.
    """
    rng = np.random.default_rng(seed)
    step = max(1, min(draws, budget // max(n, 1)))
    types = None if unit_type is None else np.asarray(unit_type, dtype=np.int32)
    width = n if types is None else int(types.max(initial=-1)) + 1
    for start in range(0, draws, step):
        k = min(step, draws - start)
        # int32 draws are ~3x faster than int64; the budget keeps k * n far below 2**31
        idx = rng.integers(0, n, size=(k, n), dtype=np.int32)
        if types is not None:
            idx = types[idx]
        idx += (np.arange(k, dtype=np.int32) * np.int32(width))[:, None]
        yield np.bincount(idx.ravel(), minlength=k * width).reshape(k, width).astype(np.float64)


def bootstrap_sums(per_unit: list, draws: int, seed: int, budget: int = BUDGET):
    """Yield, chunk by chunk, the column sums of each ``units × m`` matrix (dense or
    scipy-sparse) in ``per_unit`` over every resample: ``W @ M`` for each chunk W of
    :func:`bootstrap_weights`."""
    n = per_unit[0].shape[0]
    for w in bootstrap_weights(n, draws, seed, budget):
        yield [np.asarray((m.T @ w.T).T) for m in per_unit]


def group_summer(unit: np.ndarray, group: np.ndarray, values: list[np.ndarray], n_units: int, n_groups: int,
                 dense_cells: int = 4_000_000):
    """The function ``W -> [W-weighted sums by group of each array in values]`` for rows
    ``(unit, group, value)`` and a ``chunk × n_units`` count matrix W: the sums of
    ``value × (times the row's unit was drawn)`` by group, as :func:`bootstrap_sums` does for a
    dense ``units × m`` matrix — with no sparse-matrix library (whose import alone costs 0.4 s).

    While the units × groups table is small (≤ ``dense_cells``) it is built dense and each chunk
    is one BLAS product; beyond that (panels with very many rater pairs) each chunk gathers
    the rows' weights and sums them by group, which costs chunk × rows however many groups.
    """
    vals = [np.asarray(v, dtype=np.float64) for v in values]
    if n_units * n_groups <= dense_cells:
        cells = unit.astype(np.int64) * n_groups + group
        dense = [np.bincount(cells, weights=v, minlength=n_units * n_groups).reshape(n_units, n_groups)
                 for v in vals]
        return lambda w: [w @ m for m in dense]
    order = np.argsort(group, kind="stable")
    present, starts = np.unique(group[order], return_index=True)
    u = unit[order]
    vals = [v[order] for v in vals]

    def gathered(w):
        wu = w[:, u]
        out = []
        for v in vals:
            sums = np.zeros((len(w), n_groups))
            if len(u):
                sums[:, present] = np.add.reduceat(wu * v, starts, axis=1)
            out.append(sums)
        return out

    return gathered


def bootstrap_statistics(n_units: int, statistics: list, draws: int, seed: int, budget: int = BUDGET
                         ) -> list[np.ndarray]:
    """Evaluate several statistics on the same resamples of ``n_units`` units: each is a
    function ``W -> one value per resample`` (W a chunk of :func:`bootstrap_weights`); returns
    each statistic's ``draws`` values. The resamples are those every other function here draws
    with the same ``(n_units, draws, seed)``, so sharing them changes no result and halves the
    cost of two statistics over the same units."""
    out: list[list[np.ndarray]] = [[] for _ in statistics]
    for w in bootstrap_weights(n_units, draws, seed, budget):
        for acc, stat in zip(out, statistics, strict=True):
            acc.append(stat(w))
    return [np.concatenate(acc) if acc else np.empty(0) for acc in out]


def percentile_interval(stats: np.ndarray) -> list[float] | None:
    stats = stats[np.isfinite(stats)]
    if len(stats) == 0:
        return None
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return [float(lo), float(hi)]
