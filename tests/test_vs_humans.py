"""The model as one more rater, on the humans' own targets: hand-derived figures and invariants.

Fixture (emo keys; the sampling prior is present for task_type affirmative):

    item  task_type      a  b  c   model
    A     affirmative    1  1  1   1
    B     affirmative    1  0  1   0
    C     contrastive_1  0  0  0   1
    D     contrastive_1  0  1  1   0
    E     contrastive_1  1  0  .   0
"""

import json
import shutil

import pandas as pd
import pytest

from emolia_bench.resampling import Bootstrap
from emolia_bench.subsets import EMO
from emolia_bench.summary import Support
from emolia_bench.vs_humans import vs_humans

from .conftest import run_script

ITEMS = {"A": ("affirmative", {"a": 1, "b": 1, "c": 1}, 1), "B": ("affirmative", {"a": 1, "b": 0, "c": 1}, 0),
         "C": ("contrastive_1", {"a": 0, "b": 0, "c": 0}, 1), "D": ("contrastive_1", {"a": 0, "b": 1, "c": 1}, 0),
         "E": ("contrastive_1", {"a": 1, "b": 0}, 0)}


def frames(model=None):
    scored = pd.DataFrame([{"file_name": f"{k}.mp3", "queried_emotion": "Awe", "task_type": t,
                            "pred_present": (model or {}).get(k, m), "clip": f"{k}.mp3"} for k, (t, _, m) in ITEMS.items()])
    votes = pd.DataFrame([{"file_name": f"{k}.mp3", "queried_emotion": "Awe", "task_type": t, "rater": r, "binary": v}
                          for k, (t, vs, _) in ITEMS.items() for r, v in vs.items()])
    return scored, votes


def test_pairwise_and_leave_one_out_by_hand():
    scored, votes = frames()
    v = vs_humans(scored, votes, EMO, bootstrap=Bootstrap(draws=1000, seed=1), support=Support(30))
    pw = {r["rater"]: r for r in v["pairwise"]["model"]["per_rater"]}
    # model 1,0,1,0,0 vs a 1,1,0,0,1: right on A, D -> 2/5; a's positives A,B,E: recall 1/3, negatives C,D: 1/2
    assert pw["a"]["accuracy"] == pytest.approx(2 / 5) and pw["a"]["balanced_accuracy"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    # vs b 1,0,0,1,0: right on A, B, E -> 3/5; vs c 1,1,0,1 (A–D): right on A -> 1/4
    assert pw["b"]["accuracy"] == pytest.approx(3 / 5) and pw["c"]["accuracy"] == pytest.approx(1 / 4)
    assert v["pairwise"]["model"]["accuracy"] == pytest.approx((2 / 5 + 3 / 5 + 1 / 4) / 3)  # raters weigh equally
    # leave-one-out targets: A: a, b, c each vs 1 (others 1,1); B: only b (others a, c = 1,1) -> 1;
    # C: a, b, c vs 0; D: only a (others b, c = 1,1) -> 1; E has two votes: no comparison. 8 comparisons.
    loo = v["leave_one_out"]
    assert (loo["n_comparisons"], loo["n_items"]) == (8, 4)
    # human answers: A 1,1,1 ✓✓✓; B b=0 ✗; C 0,0,0 ✓✓✓; D a=0 ✗ -> 6/8
    # model on the same comparisons: A 1 ✓×3; B 0 ✗; C 1 ✗×3; D 0 ✗ -> 3/8
    assert loo["human"]["accuracy"] == pytest.approx(6 / 8) and loo["model"]["accuracy"] == pytest.approx(3 / 8)
    # targets: positives A×3, B, D (5), negatives C×3; human recall 3/5, specificity 3/3; model 3/5 and 0/3
    assert loo["human"]["balanced_accuracy"] == pytest.approx((3 / 5 + 1) / 2)
    assert loo["model"]["balanced_accuracy"] == pytest.approx((3 / 5 + 0) / 2)
    assert loo["model"]["balanced_accuracy_minus_human"] == pytest.approx(-0.5)
    lo, hi = loo["model"]["balanced_accuracy_minus_human_ci95"]
    assert lo <= -0.5 <= hi


def test_a_model_that_copies_a_rater_agrees_fully_with_that_rater():
    scored, votes = frames(model={k: vs.get("a", 0) for k, (_, vs, _) in ITEMS.items()})
    pw = {r["rater"]: r for r in vs_humans(scored, votes, EMO, bootstrap=Bootstrap(draws=1000, seed=1), support=Support(30))["pairwise"]["model"]["per_rater"]}
    assert pw["a"]["accuracy"] == 1.0 and pw["a"]["balanced_accuracy"] == 1.0 and pw["a"]["kappa"] == 1.0


def test_a_model_voting_the_sampling_prior_gets_exactly_the_priors_figures():
    prior = {k: int(t == "affirmative") for k, (t, _, _) in ITEMS.items()}
    scored, votes = frames(model=prior)
    v = vs_humans(scored, votes, EMO, bootstrap=Bootstrap(draws=1000, seed=1), support=Support(30))
    assert v["pairwise"]["model"] == {**v["pairwise"]["sampling_prior"]}
    assert v["leave_one_out"]["model"] == v["leave_one_out"]["sampling_prior"]


def test_benchmark_needs_votes_and_writes_the_block(tmp_path, worked_analysed):
    shutil.copytree(worked_analysed, tmp_path, dirs_exist_ok=True)
    votes = pd.read_csv(tmp_path / "analysis_outputs/emolia-emo/votes.csv")
    raw = pd.read_csv(tmp_path / "annotations/emolia-emo/annotations.csv")
    # one row per item and rater: the re-rated vote appears once, with its later rating
    assert len(votes) == len(raw.drop_duplicates(["file_name", "queried_emotion", "task_type", "username"]))
    assert list(votes.columns) == ["file_name", "queried_emotion", "task_type", "rater", "rating", "binary"]
    r = run_script("benchmark.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "benchmark_outputs/emolia-emo/summary.json").read_text())
    assert set(s["vs_humans"]["pairwise"]) == {"model", "sampling_prior", "human"}
    assert "## The model as one more rater" in (tmp_path / "benchmark_outputs/emolia-emo/report.md").read_text()
    (tmp_path / "analysis_outputs/emolia-emo/votes.csv").unlink()
    r = run_script("benchmark.py", cwd=tmp_path)
    assert r.returncode == 2 and "votes.csv" in r.stderr and "re-run analysis.py" in r.stderr


def test_votes_that_contradict_their_rating_are_refused(tmp_path, worked_analysed):
    shutil.copytree(worked_analysed, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "analysis_outputs/emolia-dim/votes.csv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-1] + ("1" if lines[1].endswith("0") else "0")
    path.write_text("\n".join(lines) + "\n")
    r = run_script("benchmark.py", cwd=tmp_path)
    assert r.returncode == 2 and "row 1" in r.stderr and "'binary'" in r.stderr


def test_rubric_names_the_constant_predictor_and_the_prior():
    from emolia_bench.reports import score_rubric

    text = score_rubric({"sampling_prior_vs_majority": {"balanced_accuracy": 0.7}, "majority_baseline": 0.63})
    assert "constant predictor" in text and "| the sampling prior as a predictor (costs nothing) | 0.700 |" in text
