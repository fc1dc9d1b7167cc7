"""The scorer interface: every registered backend implements it, so benchmark.py never asks
which backend it holds."""

import threading

import pytest

from emolia_bench.scorers import REGISTRY, Scorer, get_scorer, progress_bar


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_backend_implements_the_interface(name):
    import importlib

    module, cls = REGISTRY[name]
    backend = getattr(importlib.import_module(module), cls)  # importing needs no optional dependency
    assert issubclass(backend, Scorer) and backend.mode
    assert backend.score is not Scorer.score, f"{cls} must implement score()"


def test_progress_and_summary_follow_the_interface_not_the_backend():
    sham = get_scorer("sham")
    assert sham.shows_progress is False and sham.summary_line() is None
    with progress_bar(sham, 10, "x") as bar:
        assert bar is None  # no bar (and no tqdm import) for an instant scorer
    remote = get_scorer("endpoint", endpoints=["http://127.0.0.1:9/v1/similarity"])
    assert remote.shows_progress is True
    line = remote.summary_line()
    assert line.startswith("endpoint: 0 rows") and "0 requests" in line
    with pytest.raises(ValueError, match="unknown scorer"):
        get_scorer("nope")


def test_endpoint_counters_are_exact_under_concurrent_updates():
    # worker threads update the counters; with the lock no increment is lost
    remote = get_scorer("endpoint", endpoints=["http://127.0.0.1:9/v1/similarity"])

    def bump():
        for _ in range(20_000):
            remote._count("requests")

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert remote.stats["requests"] == 160_000

