"""Rater models (emolia_bench/rater_models.py): crowd-kit's Dawid–Skene recovers simulated rater
confusions and truth; the analysis writes them beside the majority."""

import json

import numpy as np
import pandas as pd
import pytest

from emolia_bench.rater_models import fit_rater_models
from emolia_bench.resampling import Bootstrap

from .conftest import run_script


def simulated(seed: int, n: int, confusions, prevalence: float = 0.6):
    """Every rater rates every item; rater j votes present with probability sens_j on a present
    item and 1 - spec_j on an absent one."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n) < prevalence).astype(int)
    rows = []
    for j, (sens, spec) in enumerate(confusions):
        p_present = np.where(truth == 1, sens, 1 - spec)
        votes = (rng.random(n) < p_present).astype(int)
        rows += [(i, j, int(v)) for i, v in enumerate(votes)]
    votes = pd.DataFrame(rows, columns=["item", "rater", "binary"])
    return truth, votes.assign(value=votes["binary"])


def test_dawid_skene_recovers_simulated_confusions_and_beats_the_majority_on_truth():
    # three raters with the real emo export's estimated confusions, 4,000 items
    confusions = [(0.63, 0.88), (0.78, 0.67), (0.78, 0.37)]
    truth, votes = simulated(1, 4000, confusions)
    sums = votes.groupby("item")["binary"].sum().to_numpy()
    majority, tie = (sums >= 2).astype(int), np.zeros(4000, bool)
    block, per_item, per_rater = fit_rater_models(votes, ["a", "b", "c"], majority, tie, bootstrap=Bootstrap(draws=0, seed=0))
    assert block["dawid_skene"]["converged"]
    for j, (sens, spec) in enumerate(confusions):  # within 0.05 of the simulated channel
        assert per_rater.loc[j, "ds_sensitivity"] == pytest.approx(sens, abs=0.05)
        assert per_rater.loc[j, "ds_specificity"] == pytest.approx(spec, abs=0.05)
    ds_right = (per_item["dawid_skene_label"].to_numpy() == truth).mean()
    assert ds_right >= (majority == truth).mean()  # a weighted vote is no worse than the plain one
    assert block["dawid_skene"]["labels_differ_from_majority"] == int((per_item["dawid_skene_label"] != majority).sum())
    assert ((per_item["dawid_skene_present_probability"] >= 0.5) == per_item["dawid_skene_label"].astype(bool)).all()


def test_the_analysis_writes_rater_models_beside_the_majority(tmp_path):
    r = run_script("analysis.py", "--output-root", tmp_path, "--no-figures")
    assert r.returncode == 0, r.stderr
    for subset in ("emolia-emo", "emolia-dim"):
        models = pd.read_csv(tmp_path / subset / "rater_models.csv")
        labels = pd.read_csv(tmp_path / subset / "benchmark_labels.csv")
        assert len(models) == len(labels)
        assert {"dawid_skene_present_probability", "dawid_skene_label", "mace_label"} <= set(models.columns)
        raters = pd.read_csv(tmp_path / subset / "raters.csv")
        assert {"ds_sensitivity", "ds_specificity", "one_coin_skill", "mace_competence"} <= set(raters.columns)
        block = json.loads((tmp_path / subset / "summary.json").read_text())["rater_models"]
        ones = int((labels["n_raters"] == 1).sum())
        assert block["items_one_rater"] == ones and block["items"] == len(labels)
        assert isinstance(block["dawid_skene"]["converged"], bool)


@pytest.mark.parametrize("model", ["dawid_skene", "mace"])
def test_the_benchmark_headlines_against_a_rater_model_equal_scikit_learn(demo_scored, model):
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    s = json.loads((demo_scored / "sham/emolia-emo/summary.json").read_text())["against_rater_models"][model]
    pred = pd.read_csv(demo_scored / "sham/emolia-emo/predictions.csv")
    models = pd.read_csv(demo_scored / "an/emolia-emo/rater_models.csv")
    key = ["file_name", "queried_emotion", "task_type"]
    m = pred[pred["ok"]].merge(models, on=key)
    truth = m[f"{model}_label"].to_numpy()
    assert truth.min() != truth.max() and not s["one_class"]  # both classes on the demo: the figures are defined
    assert s["rows"] == len(m) and s["labels_differ_from_majority"] == int((truth != m["majority_present"]).sum())
    assert s["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(truth, m["pred_present"]), abs=1e-12)
    assert s["auroc"] == pytest.approx(roc_auc_score(truth, m["similarity"]), abs=1e-12)
    per = [roc_auc_score(truth[g], m["similarity"].to_numpy()[g]) for g in m.groupby("queried_emotion").indices.values()
           if truth[g].min() != truth[g].max()]
    assert s["macro_auroc"] == pytest.approx(np.mean(per), abs=1e-12)


def test_a_reference_with_one_class_is_said_and_has_no_figures(tmp_path, demo_scored):
    import shutil

    an = tmp_path / "an"
    shutil.copytree(demo_scored / "an", an)
    path = an / "emolia-emo/rater_models.csv"
    models = pd.read_csv(path)
    models["mace_label"] = 1  # as one-coin Dawid-Skene labels every real emo item present
    models.to_csv(path, index=False)
    r = run_script("benchmark.py", "--analysis-root", an, "--output-dir", tmp_path / "out", "--subset", "emolia-emo")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "out/emolia-emo/summary.json").read_text())["against_rater_models"]["mace"]
    assert s["one_class"] and s["macro_auroc"] is None and s["cv_balanced_accuracy_per_prompt"] is None
    assert s["balanced_accuracy_ci95"] is None
    assert "one class only: no reference" in (tmp_path / "out/emolia-emo/report.md").read_text()
