"""The scorer interface: every registered backend implements it, so benchmark.py never asks
which backend it holds."""


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


