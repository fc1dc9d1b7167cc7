"""Bootstrap resampling shared by the agreement ceiling and the model metrics.

Resampling is vectorised: each chunk of draws is a ``draws × units`` count matrix W (how often
each unit was drawn), and any per-unit statistic that is a sum becomes ``W @ M``.
"""

from __future__ import annotations

import numpy as np


def bootstrap_sums(per_unit: list, draws: int, seed: int, budget: int = 1_000_000):
    """Resample units with replacement ``draws`` times; yield, chunk by chunk, the column sums
    of each ``units × m`` matrix (dense or scipy-sparse) in ``per_unit`` over every resample.

    Each chunk draws a ``chunk × units`` count matrix W (how often each unit was drawn) and
    returns ``W @ M``; ``budget`` bounds W's size (1M cells: small enough to stay in cache,
    twice as fast as 4M here), so memory stays flat at any data size.
    """
    rng = np.random.default_rng(seed)
    n = per_unit[0].shape[0]
    step = max(1, min(draws, budget // max(n, 1)))
    for start in range(0, draws, step):
        k = min(step, draws - start)
        # int32 draws are ~3x faster than int64; the budget keeps k * n far below 2**31
        idx = rng.integers(0, n, size=(k, n), dtype=np.int32)
        idx += (np.arange(k, dtype=np.int32) * np.int32(n))[:, None]
        w = np.bincount(idx.ravel(), minlength=k * n).reshape(k, n).astype(np.float64)
        yield [np.asarray((m.T @ w.T).T) for m in per_unit]


def percentile_interval(stats: np.ndarray) -> list[float] | None:
    stats = stats[np.isfinite(stats)]
    if len(stats) == 0:
        return None
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return [float(lo), float(hi)]
