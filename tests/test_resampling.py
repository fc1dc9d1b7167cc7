"""The bootstrap's one stream and its one summation path, against resamples drawn explicitly."""

import numpy as np
import pytest

from emolia_bench.resampling import Bootstrap, group_sums, percentile_interval


def explicit_counts(n: int, draws: int, seed: int) -> np.ndarray:
    """draws × n: how often each unit was drawn, from one explicit draws × n draw of numpy's generator."""
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n), dtype=np.int32)
    return np.stack([np.bincount(row, minlength=n) for row in idx]).astype(float)


@pytest.mark.parametrize("cells", [None, 1, 37, 5 * 37 + 3, 10**6])
def test_counts_are_the_explicit_resamples_whatever_the_chunk_size(cells):
    # the chunk size (set by the cells a resample spans) only cuts the stream into pieces
    got = np.concatenate(list(Bootstrap(draws=50, seed=9).counts(37, cells_per_resample=cells)))
    assert np.array_equal(got, explicit_counts(37, 50, 9))


def test_no_units_give_no_resamples():
    assert list(Bootstrap(draws=10, seed=1).counts(0)) == []
    assert Bootstrap(draws=10, seed=1).map(lambda w: w.sum(axis=1), 0).size == 0


def test_grouped_sums_equal_an_explicit_resample():
    # rows (unit, group, value): group 1 has no rows (sums stay 0), (unit 1, group 2) has two rows,
    # unit 5 has none. Group g's sum is Σ over rows of value × times the row's unit was drawn.
    unit = np.array([0, 1, 1, 3, 2, 1, 4])
    group = np.array([2, 0, 2, 0, 0, 2, 2])
    value = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0, 3.0, 7.0])
    times = explicit_counts(6, 40, 5)
    want = np.zeros((40, 3))
    for u, g, v in zip(unit, group, value, strict=True):
        want[:, g] += v * times[:, u]
    got = Bootstrap(draws=40, seed=5).grouped(lambda s: s[0], unit=unit, group=group, values=[value], n_units=6,
                                              n_groups=3)
    assert np.array_equal(got, want)
    # all-ones weights: the plain sums (what every point estimate is computed from)
    (plain,) = group_sums(unit, group, [value], 6, 3)(np.ones((1, 6)))
    assert plain.tolist() == [[11010.0, 0.0, 111.0]]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_change_nothing(threads):
    # a statistic that names its chunk's resamples: any thread count gives them in order
    one = Bootstrap(draws=200, seed=3).map(lambda w: w @ np.arange(30.0), 30, cells_per_resample=300)
    got = Bootstrap(draws=200, seed=3, threads=threads).map(lambda w: w @ np.arange(30.0), 30, cells_per_resample=300)
    assert np.array_equal(got, one) and np.array_equal(one, explicit_counts(30, 200, 3) @ np.arange(30.0))


def test_percentile_interval_drops_undefined_resamples():
    # numpy's linear interpolation over the finite values 0..100: 2.5 and 97.5
    assert percentile_interval(np.r_[np.arange(101.0), np.nan, np.inf]) == (2.5, 97.5)
    assert percentile_interval(np.array([np.nan])) is None


def test_a_stream_asked_for_again_is_read_back_from_the_bootstrap_value(monkeypatch):
    # the first request draws and keeps the stream in this Bootstrap value; the second reads it;
    # both equal the explicit resamples. A stream over the cap is drawn anew, with the same counts.
    b = Bootstrap(draws=40, seed=8)
    want = explicit_counts(300, 40, 8)
    for _ in range(2):
        assert np.array_equal(np.concatenate(list(b.counts(300, cells_per_resample=7 * 300))), want)
        assert list(b.kept) == [300]
    from emolia_bench import resampling

    monkeypatch.setattr(resampling, "KEPT_CELLS", 10)
    fresh = Bootstrap(draws=40, seed=8)
    assert np.array_equal(np.concatenate(list(fresh.counts(300))), want) and not fresh.kept
    # another value starts empty: nothing is shared between runs
    assert not Bootstrap(draws=40, seed=8).kept
