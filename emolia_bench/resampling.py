"""The bootstrap, once, for every interval in the package: the agreement ceiling (items), the
model metrics per slice and the paired comparison of two runs (clips).

Every statistic we resample is built from *grouped sums of counts*: rows ``(unit, group,
values…)``, where a unit is what is resampled (an item, a clip), a group is what a figure is
computed over (a rater pair, a slice) and the values are 0/1 counts (agreements, true
positives…). One resample draws the units with replacement; a row counts as many times as its
unit was drawn. :func:`bootstrap_statistic` computes, for every resample, each value's sum by
group; the caller turns those sums into its statistic (an accuracy, a balanced accuracy, a
difference of two).

Resampling is vectorised: a chunk of draws is a ``draws × units`` count matrix W (how often each
unit was drawn), and the grouped sums are ``W @ table``. Units whose rows are identical (same
groups, same counts) are interchangeable, so only how often each *kind* of unit was drawn
matters: the table shrinks to one row per kind (a few thousand clips instead of every clip,
eight kinds of complete item instead of eight thousand items). The resamples themselves — the
random stream of :func:`bootstrap_weights` — are the same whatever is merged, and since every
value is an integer count every sum is exact, so merging changes no result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

# Cells of one chunk of resamples (2 MB of float64): small enough to stay in cache while the
# draws are counted; 1M cells made the benchmark's clip bootstrap 30 % slower here. Chunking
# never changes a result: the draws are the same stream however it is cut.
BUDGET = 1 << 18
# A units × groups table up to this many cells is multiplied dense (one BLAS product per chunk).
DENSE_CELLS = 4_000_000


# Several figures of one run resample the same units with the same seed (a subset's slice
# intervals, AUROC, the cross-validated and graded headlines all draw its clips). The second time a
# stream is asked for, its counts are kept, one byte a cell, up to this many cells in all, and
# later requests read them instead of drawing again (a stream asked for once is drawn the cheapest
# way and not kept). Benchmark.py, sham, 1× synthetic exports: the dim subset's 29,582 clips were
# drawn 6 times, 1.1 s of 5.5 s single-threaded. Beyond the cap, counts are drawn anew (same
# stream, same numbers), so memory stays bounded at any data size.
SHARED_CELLS = 64 << 20
_kept: dict[tuple[int, int, int], np.ndarray] = {}
_asked: set[tuple[int, int, int]] = set()
_kept_lock = threading.Lock()


def _draws(n: int, draws: int, seed: int, step: int):
    """The stream itself: ``(k, idx)`` with ``idx`` the ``k × n`` drawn units' indices, ``step``
    resamples a chunk."""
    rng = np.random.default_rng(seed)
    for start in range(0, draws, step):
        k = min(step, draws - start)
        # int32 draws are ~3x faster than int64; the budget keeps k * n far below 2**31
        idx = rng.integers(0, n, size=(k, n), dtype=np.int32)
        yield k, idx


def _counted(idx: np.ndarray, width: int) -> np.ndarray:
    """``k × width`` counts of the values 0..width-1 in each row of ``idx`` (one bincount)."""
    k = len(idx)
    idx += (np.arange(k, dtype=np.int32) * np.int32(width))[:, None]
    return np.bincount(idx.ravel(), minlength=k * width).reshape(k, width)


def _kept_counts(n: int, draws: int, seed: int, step: int):
    """The stream's ``k × n`` count matrices, drawn once and then kept (see :data:`SHARED_CELLS`)."""
    key = (n, draws, seed)
    with _kept_lock:
        kept = _kept.get(key)
    if kept is not None:
        for start in range(0, draws, step):
            yield kept[start:start + step]
        return
    keep = np.empty((draws, n), np.uint8)
    start = 0
    for k, idx in _draws(n, draws, seed, step):
        counts = _counted(idx, n)
        if keep is not None:
            if n > 255 and counts.max(initial=0) > 255:  # a byte cannot hold it: keep nothing
                keep = None
            else:
                keep[start:start + k] = counts
        start += k
        yield counts
    if keep is not None:
        with _kept_lock:
            _kept[key] = keep
            while sum(a.size for a in _kept.values()) > SHARED_CELLS:
                del _kept[next(iter(_kept))]  # the oldest


def bootstrap_weights(n: int, draws: int, seed: int, budget: int = BUDGET, unit_type: np.ndarray | None = None):
    """Resample ``n`` units with replacement ``draws`` times; yield the ``chunk × n`` count
    matrices W (how often each unit was drawn in each resample, float64), chunk by chunk.

    ``budget`` bounds W's size (see :data:`BUDGET`), so memory stays flat at any data size.
    With ``unit_type`` (each unit's type, 0..T-1) the counts are summed by type instead:
    ``chunk × T`` matrices of the very same resamples, for statistics in which units of one
    type are interchangeable. The stream depends only on ``(n, draws, seed)``; a stream asked for
    again is read from kept counts (:data:`SHARED_CELLS`).
    """
    step = max(1, min(draws, budget // max(n, 1)))
    types = None if unit_type is None else np.asarray(unit_type, dtype=np.int64)
    width = n if types is None else int(types.max(initial=-1)) + 1
    key = (n, draws, seed)
    with _kept_lock:
        keep = key in _kept or (key in _asked and 0 < draws * n <= SHARED_CELLS)
        _asked.add(key)
    if not keep:  # straight from the draws: each chunk counted once, by unit or by type
        types32 = None if types is None else types.astype(np.int32)
        for _, idx in _draws(n, draws, seed, step):
            yield _counted(idx if types32 is None else types32[idx], width).astype(np.float64)
        return
    counts = _kept_counts(n, draws, seed, step)
    if types is None:
        for c in counts:
            yield c.astype(np.float64)
    elif width <= 32:  # a few types: one BLAS product with the units' one-hot types (exact: integer sums)
        one_hot = np.zeros((n, width))
        one_hot[np.arange(n), types] = 1.0
        for c in counts:
            yield c.astype(np.float64) @ one_hot
    else:  # many: the units ordered by type, their counts summed type by type
        by_type = np.argsort(types, kind="stable")
        starts = np.searchsorted(types[by_type], np.arange(width))
        for c in counts:
            yield np.add.reduceat(c[:, by_type], starts, axis=1, dtype=np.float64)


def group_summer(unit: np.ndarray, group: np.ndarray, values: Sequence[np.ndarray], n_units: int, n_groups: int,
                 dense_cells: int = DENSE_CELLS, path: str | None = None) -> Callable[[np.ndarray], list[np.ndarray]]:
    """The function ``W -> [W-weighted sums by group of each array in values]`` for rows
    ``(unit, group, value)`` and a ``chunk × n_units`` count matrix W: for each value array, a
    ``chunk × n_groups`` array of Σ value × (times the row's unit was drawn).

    Rows of one (unit, group) cell are summed first (values are counts: exact). Then either the
    units × groups table, dense, is one BLAS product per chunk (``"dense"``), or each chunk
    gathers the cells' weights and sums them by group (``"gathered"``, chunk × cells). By default
    the cheaper for the chunk at hand, by a rough cost model: the product reads the whole table
    once per chunk however few resamples it holds, the gather costs a few passes over chunk ×
    cells. Measured per chunk (two value arrays): 29,582 clips × 59 groups, 98 % empty, 4
    resamples — product 2.9 ms, gather 1.5 ms; 1,158 kinds × 60 slices, 226 resamples — product
    0.8 ms, gather 3.3 ms. No table over ``dense_cells`` is built.
    """
    unit, group = np.asarray(unit, dtype=np.int64), np.asarray(group, dtype=np.int64)
    cells, at = np.unique(unit * n_groups + group, return_inverse=True)
    vals = [np.bincount(at.ravel(), weights=np.asarray(v, dtype=np.float64), minlength=len(cells)) for v in values]
    table = n_units * n_groups
    built: dict = {}

    def dense(w):
        if "dense" not in built:
            built["dense"] = [np.bincount(cells, weights=v, minlength=table).reshape(n_units, n_groups) for v in vals]
        return [w @ m for m in built["dense"]]

    def gathered(w):
        if "gathered" not in built:
            by_group = np.argsort(cells % max(n_groups, 1), kind="stable")
            g = (cells % max(n_groups, 1))[by_group]
            present, starts = np.unique(g, return_index=True)
            built["gathered"] = (cells[by_group] // max(n_groups, 1), [v[by_group] for v in vals], present, starts)
        u, vs, present, starts = built["gathered"]
        wu = w[:, u]
        out = []
        for v in vs:
            sums = np.zeros((len(w), n_groups))
            if len(u):
                sums[:, present] = np.add.reduceat(wu * v, starts, axis=1)
            out.append(sums)
        return out

    def summer(w):
        choice = path
        if choice is None:  # rough costs (ns): the product ~ table × (1 + chunk/8), the gather ~ 3 × chunk × cells
            choice = "dense" if table <= dense_cells and table * (1 + len(w) / 8) <= 3 * len(w) * len(cells) else "gathered"
        return dense(w) if choice == "dense" else gathered(w)

    return summer


def interchangeable_units(unit: np.ndarray, group: np.ndarray, values: Sequence[np.ndarray], n_units: int,
                          n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """Merge units whose rows are identical.

    Rows are first summed per (unit, group); two units are of one *type* when they have the same
    groups with the same sums (units without rows form one type too). Returns ``(unit_type,
    type_of_cell, group_of_cell, sums_of_cell)``: each unit's type (0..T-1, in order of first
    appearance) and the summed rows of one representative unit per type, keyed by type. Exact:
    rows are compared by their bytes (pandas hashes them and compares on collision).
    """
    k = len(values)
    cells = np.asarray(unit, dtype=np.int64) * n_groups + np.asarray(group, dtype=np.int64)
    uniq, inverse = np.unique(cells, return_inverse=True)  # sorted by (unit, group)
    sums = [np.bincount(inverse, weights=np.asarray(v, dtype=np.float64), minlength=len(uniq)) for v in values]
    cell_unit, cell_group = uniq // max(n_groups, 1), uniq % max(n_groups, 1)
    per_unit = np.bincount(cell_unit, minlength=n_units)
    width = int(per_unit.max(initial=0))
    starts = np.concatenate([[0], np.cumsum(per_unit)[:-1]])
    at = np.arange(len(uniq)) - starts[cell_unit]  # position of each cell among its unit's cells
    # one row per unit: its number of cells, then each cell's group and sums (-1 pads)
    entries = np.full((n_units, 1 + width * (1 + k)), -1.0)
    entries[:, 0] = per_unit
    entries[cell_unit, 1 + at] = cell_group
    for j, s in enumerate(sums):
        entries[cell_unit, 1 + width * (1 + j) + at] = s
    keys = entries.view(np.dtype((np.void, entries.shape[1] * 8))).ravel().astype(object)
    unit_type, kinds = pd.factorize(keys)
    representative = np.empty(len(kinds), dtype=np.int64)
    representative[unit_type[::-1]] = np.arange(n_units)[::-1]  # the first unit of each type
    is_rep = np.zeros(n_units, dtype=bool)
    is_rep[representative] = True
    keep = is_rep[cell_unit]
    return (unit_type.astype(np.int64), unit_type[cell_unit[keep]].astype(np.int64), cell_group[keep],
            [s[keep] for s in sums])


def threads() -> int:
    """Threads for the resamples: the cores this process may use, shared among the jobs running
    side by side (:data:`parallel.SHARING`), at most 8."""
    from . import parallel

    return max(1, min(8, parallel.cores() // parallel.SHARING))


def map_chunks(function: Callable[[np.ndarray], np.ndarray], chunks, workers: int | None = None) -> np.ndarray:
    """``function`` of every chunk of resamples, concatenated in the chunks' order.

    The chunks (drawn one after another from the one random stream, in this thread) are worked
    on by a few threads at once: numpy releases the GIL inside its loops (benchmark.py, sham,
    1× synthetic exports, --no-figures, on 2 cores: 5.5–5.9 s with 2 threads, 6.4–7.2 s with
    one; the loops share the memory bandwidth, so it is not 2×). Each
    chunk's result depends only on that chunk and the results keep their order, so the output
    is bit for bit the same as one thread's. At most ``2 × workers`` chunks are in flight, so
    memory stays bounded however many draws there are."""
    workers = threads() if workers is None else workers
    if workers == 1:
        done = [function(c) for c in chunks]
    else:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        done, pending = [], deque()
        with ThreadPoolExecutor(workers, thread_name_prefix="resample") as pool:
            for chunk in chunks:
                pending.append(pool.submit(function, chunk))
                if len(pending) >= 2 * workers:
                    done.append(pending.popleft().result())
            done.extend(f.result() for f in pending)
    return np.concatenate(done) if done else np.empty(0)


def bootstrap_statistic(unit: np.ndarray, group: np.ndarray, values: Sequence[np.ndarray], n_units: int,
                        n_groups: int, statistic: Callable[[list[np.ndarray]], np.ndarray], draws: int, seed: int,
                        budget: int = BUDGET) -> np.ndarray:
    """``statistic`` of the grouped sums of every resample of the ``n_units`` units,
    concatenated: ``draws`` rows. A chunk's sums are a list of ``chunk × n_groups`` arrays
    Σ value × (times the row's unit was drawn), one per array in ``values``.

    ``values`` must be counts (integers): merging interchangeable units (see the module
    docstring) is then exact. The resamples are those of ``bootstrap_weights(n_units, draws,
    seed)``, so two calls with the same units, draws and seed see the same resamples.
    """
    unit_type, type_unit, type_group, type_values = interchangeable_units(unit, group, values, n_units, n_groups)
    summer = group_summer(type_unit, type_group, type_values, int(unit_type.max(initial=-1)) + 1, n_groups)
    return map_chunks(lambda w: statistic(summer(w)), bootstrap_weights(n_units, draws, seed, budget, unit_type=unit_type))


def percentile_interval(stats: np.ndarray) -> list[float] | None:
    """The 95 % percentile interval of the finite values among ``stats`` (resamples where the
    statistic is undefined are dropped); None when none is finite."""
    stats = stats[np.isfinite(stats)]
    if len(stats) == 0:
        return None
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return [float(lo), float(hi)]
