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




def test_the_sampling_prior_scorer_scores_the_prior_and_compare_ranks_it(tmp_path, demo_scored):
    import pandas as pd
    from sklearn.metrics import balanced_accuracy_score

    from .conftest import run_script

    r = run_script("benchmark.py", "--analysis-root", demo_scored / "an", "--output-dir", tmp_path / "prior",
                   "--sampling-prior")
    assert r.returncode == 0, r.stderr
    pred = pd.read_csv(tmp_path / "prior/emolia-emo/predictions.csv")
    labels = pd.read_csv(demo_scored / "an/emolia-emo/benchmark_labels.csv")
    m = pred[pred["ok"]].merge(labels[["file_name", "queried_emotion", "task_type"]],
                               on=["file_name", "queried_emotion", "task_type"])
    prior = (m["task_type"] == "affirmative").astype(int)  # emo's prior: sampled to be present when affirmative
    assert (m["pred_present"] == prior).all() and set(m["similarity"]) <= {-1.0, 1.0}
    summary = pd.read_json(tmp_path / "prior/emolia-emo/summary.json", typ="series")
    assert summary["mode"] == "sampling_prior"
    assert summary["overall"]["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(m["majority_present"], prior))
    c = run_script("compare.py", demo_scored / "sham", tmp_path / "prior", "--output-dir", tmp_path / "cmp")
    assert c.returncode == 0, c.stderr
    ranks = pd.read_csv(tmp_path / "cmp/rank_by_reference.csv")
    assert {"majority", "dawid_skene"} <= set(ranks["reference"]) and ranks["rank"].notna().all()
    assert "## Does the ranking depend on the label?" in (tmp_path / "cmp/leaderboard.md").read_text()
