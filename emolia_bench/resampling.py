"""The bootstrap, once, for every interval in the package: the agreement ceiling (items), the
model metrics per slice and the paired comparison of two runs (clips).

A :class:`Bootstrap` is the one explicit value that says how intervals are resampled: ``draws``
resamples of the units with replacement, from ``seed``. A stage builds it once from its
``--bootstrap-draws`` / ``--seed`` and passes it to every interval it computes; nothing is kept
between calls, so the same arguments always give the same numbers.

One resample is a vector of counts (how often each unit was drawn); a chunk of resamples is a
``chunk × units`` count matrix W. Every statistic is then a function of W:

* figures built from *grouped sums of counts* (accuracies, balanced accuracies, κ tables,
  coincidence matrices) read them off :meth:`Bootstrap.grouped`, which sums each value array by
  group with one sparse product ``W @ M`` (M: units × groups). Values are integer counts, so
  every sum is exact whatever the order of summation;
* rank statistics (AUROC, Spearman's ρ) take W itself (:mod:`ranking`).

The point estimate of every figure is the same function at W = all ones (each unit once), so a
figure and its interval come from one computation.

Undefined resamples (a statistic that is NaN there, e.g. a class absent from the resample) are
dropped by :func:`percentile_interval`.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from .summary import Interval

# Cells of one chunk of resamples (2 MB of float64): small enough to stay in cache while the
# draws are counted. The chunking never changes a result: the random stream is the same however
# it is cut (tests/test_resampling.py checks it).
BUDGET = 1 << 18
# A Bootstrap keeps the counts of the streams it has drawn, one or two bytes a cell, up to this
# many cells in all (64 MB at one byte): a benchmark run resamples the same clips for the slice
# table, AUROC, the cross-validated and the graded figures, and drawing a stream again costs as
# much as the statistic itself. Beyond the cap a stream is drawn anew each time (same numbers).
KEPT_CELLS = 64 << 20


def default_threads() -> int:
    """Threads for the resamples: the cores this process may use, at most 4 (numpy releases the
    GIL in its loops, and the loops share the memory bandwidth, so more threads gain little)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


@dataclass(frozen=True)
class Bootstrap:
    """``draws`` resamples with replacement of whatever units a figure rests on, from ``seed``.

    The stream of a figure over ``n`` units depends only on ``(n, draws, seed)``: two figures over
    the same units see the same resamples (so their paired difference is a paired bootstrap).
    ``threads`` only splits the work; results are identical for any value.
    """

    draws: int
    seed: int
    threads: int = 1
    #: the streams drawn so far (n_units -> draws × n_units counts), within :data:`KEPT_CELLS`
    kept: dict = field(default_factory=dict, compare=False, repr=False)

    def counts(self, n_units: int, cells_per_resample: int | None = None) -> Iterator[np.ndarray]:
        """The resamples of ``n_units`` units as ``chunk × n_units`` float64 count matrices, chunk
        by chunk; a chunk spans at most :data:`BUDGET` cells of ``cells_per_resample`` (default:
        one per unit) each, so memory stays flat at any size. Nothing when ``n_units`` or
        ``draws`` is 0."""
        if n_units <= 0 or self.draws <= 0:
            return
        step = max(1, min(self.draws, BUDGET // max(cells_per_resample or n_units, 1)))
        kept = self.kept.get(n_units)
        if kept is None and n_units <= 0xFFFF and self.draws * n_units + sum(a.size for a in self.kept.values()) <= KEPT_CELLS:
            # (a count never exceeds n_units, so two bytes hold every count)
            kept = self.kept[n_units] = np.concatenate(list(self._drawn(n_units, step, np.uint16)))
        if kept is not None:
            for start in range(0, self.draws, step):
                yield kept[start:start + step].astype(np.float64)
            return
        yield from self._drawn(n_units, step, np.float64)

    def _drawn(self, n_units: int, step: int, dtype) -> Iterator[np.ndarray]:
        """The stream itself, ``step`` resamples a chunk."""
        rng = np.random.default_rng(self.seed)
        offsets = np.arange(step, dtype=np.int32)[:, None] * np.int32(n_units)
        for start in range(0, self.draws, step):
            k = min(step, self.draws - start)
            # int32 draws (numpy's stream for this dtype; the budget keeps k * n far below 2**31)
            idx = rng.integers(0, n_units, size=(k, n_units), dtype=np.int32)
            idx += offsets[:k]
            yield np.bincount(idx.ravel(), minlength=k * n_units).reshape(k, n_units).astype(dtype)

    def map(self, statistic: Callable[[np.ndarray], np.ndarray], n_units: int,
            cells_per_resample: int | None = None) -> np.ndarray:
        """``statistic(W)`` of every chunk W of :meth:`counts`, concatenated in order (``draws``
        rows). Chunks are drawn here, in order, and worked on by ``threads`` threads; at most two
        per thread are in flight, so memory stays bounded."""
        chunks = self.counts(n_units, cells_per_resample)
        if self.threads <= 1:
            done = [statistic(w) for w in chunks]
        else:
            done, pending = [], deque()
            with ThreadPoolExecutor(self.threads, thread_name_prefix="resample") as pool:
                for w in chunks:
                    pending.append(pool.submit(statistic, w))
                    if len(pending) >= 2 * self.threads:
                        done.append(pending.popleft().result())
                done.extend(f.result() for f in pending)
        return np.concatenate(done) if done else np.empty(0)

    def grouped(self, statistic: Callable[[list[np.ndarray]], np.ndarray], *, unit: np.ndarray,
                group: np.ndarray, values: Sequence[np.ndarray], n_units: int, n_groups: int) -> np.ndarray:
        """``statistic`` of the grouped sums of every resample: for rows ``(unit, group, value…)``
        the statistic gets, per value array, the ``chunk × n_groups`` sums Σ value × (times the
        row's unit was drawn). ``values`` must be counts (integers) for the sums to be exact."""
        sums = group_sums(unit, group, values, n_units, n_groups)
        return self.map(lambda w: statistic(sums(w)), n_units)


def group_sums(unit: np.ndarray, group: np.ndarray, values: Sequence[np.ndarray], n_units: int,
               n_groups: int) -> Callable[[np.ndarray], list[np.ndarray]]:
    """The function ``W -> [W @ M_v for each value array v]`` with ``M_v[u, g]`` the sum of v over
    the rows of unit u in group g (sparse): per resample, each group's weighted sum. With W = all
    ones (shape ``1 × n_units``) it gives the plain sums, the point estimate's input."""
    unit, group = np.asarray(unit, dtype=np.int64), np.asarray(group, dtype=np.int64)
    tables = [sparse.csr_array((np.asarray(v, dtype=np.float64), (unit, group)), shape=(n_units, n_groups))
              for v in values]  # duplicate (unit, group) rows are summed
    # C order, as a dense product gives: numpy sums over several axes in an order set by the layout
    return lambda w: [np.ascontiguousarray(w @ m) for m in tables]


def percentile_interval(stats: np.ndarray) -> Interval | None:
    """The 95 % percentile interval of the finite values among ``stats`` (resamples where the
    statistic is undefined are dropped; numpy's linear interpolation); None when none is finite."""
    stats = stats[np.isfinite(stats)]
    if len(stats) == 0:
        return None
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return Interval(float(lo), float(hi))


# z_0.975 + z_0.80: a difference this many standard errors from the null is detected with 80 %
# power by a two-sided 5 % test
Z_POWER_80 = 1.959963984540054 + 0.8416212335729143


def detectable_difference(stats: np.ndarray) -> float | None:
    """The minimum detectable difference at 80 % power and 5 % (two-sided): (z_0.975 + z_0.8) ×
    the standard deviation of the finite resamples; None with fewer than two."""
    stats = stats[np.isfinite(stats)]
    return float(Z_POWER_80 * np.std(stats, ddof=1)) if len(stats) >= 2 else None
