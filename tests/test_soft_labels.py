"""Soft labels, calibration and the noise ceiling (emolia_bench/soft_labels.py, ceiling.py):
each figure against numbers worked by hand on small fixtures or against an independent library
(scikit-learn, scipy), and end to end on the demo's benchmark run."""

import json

import numpy as np
import pandas as pd
import pytest

from emolia_bench.ceiling import (
    ceiling_block,
    channel_means,
    mean_rating_reliability,
    vote_agreement,
)
from emolia_bench.compare import Run, ranks_by_reference
from emolia_bench.rater_models import pairwise_agreement_per_item
from emolia_bench.resampling import Bootstrap
from emolia_bench.soft_labels import cv_probabilities, jensen_shannon, platt_fit, soft_figures
from emolia_bench.subsets import SUBSETS

from .conftest import run_script

NONE = Bootstrap(draws=0, seed=0)

# four items: p the model's probability, q the vote fraction, m the majority
P = np.array([0.2, 0.82, 0.88, 0.6])
Q = np.array([0.0, 1.0, 0.5, 0.5])
M = np.array([0.0, 1.0, 0.0, 0.0])


def test_brier_and_calibration_error_by_hand():
    f = soft_figures(P[None, :], {"vote_fraction": Q}, M, np.ones((1, 4)))[0]
    # Brier: ((0.2-0)^2 + (0.82-1)^2 + (0.88-0.5)^2 + (0.6-0.5)^2) / 4 = (0.04 + 0.0324 + 0.1444 + 0.01) / 4
    assert f[0] == pytest.approx(0.0567, abs=1e-12)
    # bins: 0.2 -> [0.2, 0.3); 0.82 and 0.88 -> [0.8, 0.9) (mean p 0.85, mean q 0.75, mean majority 0.5); 0.6 alone.
    # ECE vs q = (|0.2-0| + 2 |0.85-0.75| + |0.6-0.5|) / 4 = 0.125; vs the majority (0.2 + 2*0.35 + 0.6) / 4 = 0.375
    assert f[2] == pytest.approx(0.125, abs=1e-12)
    assert f[3] == pytest.approx(0.375, abs=1e-12)
    # the reliability bins follow: rows, mean p, mean q, mean majority per bin
    rows, mean_p, mean_q = f[4:14], f[14:24], f[24:34]
    assert rows[8] == 2 and mean_p[8] == pytest.approx(0.85) and mean_q[8] == pytest.approx(0.75)
    assert rows.sum() == 4 and np.isnan(mean_p[0])


def test_jensen_shannon_equals_scipy():
    from scipy.spatial.distance import jensenshannon

    # scipy's Jensen-Shannon *distance* is the square root of the divergence
    want = [jensenshannon([p, 1 - p], [q, 1 - q], base=2) ** 2 for p, q in zip(P, Q, strict=True)]
    assert jensen_shannon(P, Q) == pytest.approx(want, abs=1e-12)
    f = soft_figures(P[None, :], {"vote_fraction": Q}, M, np.ones((1, 4)))[0]
    assert f[1] == pytest.approx(np.mean(want), abs=1e-12)
    # by hand for one pair: p = 0.5, q = 0: H(0.25) - (H(0.5) + H(0)) / 2 = 0.811278 - 0.5
    assert jensen_shannon(np.array([0.5]), np.array([0.0]))[0] == pytest.approx(0.311278, abs=1e-6)


def test_platt_map_equals_scikit_learn_on_duplicated_rows():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x, q = rng.normal(size=120), rng.integers(0, 4, 120) / 3
    folds = np.arange(120) % 3
    p = cv_probabilities(x, q, folds, np.ones((1, 120)))[0]
    for f in range(3):  # each fold's probabilities from a fit on the other folds, soft labels as weights
        tr = folds != f
        X, Y = np.r_[x[tr], x[tr]][:, None], np.r_[np.ones(tr.sum()), np.zeros(tr.sum())]
        lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(X, Y, sample_weight=np.r_[q[tr], 1 - q[tr]])
        assert p[folds == f] == pytest.approx(lr.predict_proba(x[folds == f][:, None])[:, 1], abs=1e-7)
    # weights 2 on a row equal the row written twice
    w = np.ones(120)
    w[:10] = 2
    a, b = platt_fit(x, q, w[None, :])
    a2, b2 = platt_fit(np.r_[x, x[:10]], np.r_[q, q[:10]], np.ones((1, 130)))
    assert (a[0], b[0]) == pytest.approx((a2[0], b2[0]), abs=1e-9)


def test_soft_auroc_equals_scikit_learn_with_sample_weights():
    from sklearn.metrics import roc_auc_score

    from emolia_bench.ranking import auroc_with_intervals

    rng = np.random.default_rng(1)
    s, q = np.round(rng.normal(size=80), 1), rng.integers(0, 4, 80) / 3
    a = auroc_with_intervals(q, s, np.arange(80).astype(str), np.arange(80) % 2, bootstrap=NONE)
    # every item once as a positive weighted q and once as a negative weighted 1 - q
    want = roc_auc_score(np.r_[np.ones(80), np.zeros(80)], np.r_[s, s], sample_weight=np.r_[q, 1 - q])
    assert a["auroc"] == pytest.approx(want, abs=1e-12)
    per = [roc_auc_score(np.r_[np.ones(40), np.zeros(40)], np.r_[s[g::2], s[g::2]], sample_weight=np.r_[q[g::2], 1 - q[g::2]])
           for g in (0, 1)]
    assert a["macro_auroc"] == pytest.approx(np.mean(per), abs=1e-12)


def test_noise_ceiling_by_hand():
    # channels: rater 0 (3 votes) sensitivity 0.9 specificity 0.4, rater 1 (1 vote) 0.5 / 0.8:
    # s = 0.75*0.9 + 0.25*0.5 = 0.8, c = 0.75*0.4 + 0.25*0.8 = 0.5
    assert channel_means(np.array([0.9, 0.5]), np.array([0.4, 0.8]), np.array([3, 1])) == pytest.approx((0.8, 0.5))
    # posteriors 1, 0, 0.5 with s = 0.8, c = 0.6: ceiling per item 0.8, 0.6, 0.5*0.8 + 0.5*0.6 = 0.7 -> mean 0.7;
    # P(next vote present) v = 0.8, 0.4, 0.6: the votes' own predictor max(v, 1-v) -> mean (0.8+0.6+0.6)/3;
    # constant: mean v = 0.6 -> 0.6
    item, vote = np.array([0, 0, 0, 1, 2, 2]), np.array([1, 1, 0, 0, 1, 0])
    agree = vote_agreement(np.array([1, 0, 1]), item, vote, 3)  # 2/3, 1, 1/2
    assert agree == pytest.approx([2 / 3, 1, 0.5])
    pi = np.array([1.0, 0.0, 0.5])

    def fixed_fit(w):  # a fit that returns these posteriors and channels whatever the weights
        return np.broadcast_to(pi, w.shape), np.full(len(w), 0.8), np.full(len(w), 0.6)

    c = ceiling_block(fixed_fit, np.arange(3), bootstrap=NONE, channels=(0.8, 0.6), agreements={"model": agree})
    assert c["ceiling"]["value"] == pytest.approx(0.7)
    assert c["votes_own_predictor"]["value"] == pytest.approx(2 / 3)
    assert c["constant_predictor"]["value"] == pytest.approx(0.6)
    assert c["model"]["agreement_with_votes"]["value"] == pytest.approx((2 / 3 + 1 + 0.5) / 3)
    # headroom: (0.7222 - 0.6) / (0.7 - 0.6)
    assert c["model"]["headroom_reached"]["value"] == pytest.approx(((2 / 3 + 1 + 0.5) / 3 - 0.6) / 0.1)
    # humans: votes 1,1,0 -> 1 agreeing pair of 3; one vote -> undefined; 1,0 -> 0 of 1
    frame = pd.DataFrame({"item": item, "binary": vote})
    h = pairwise_agreement_per_item(frame, 3)
    assert h[0] == pytest.approx(1 / 3) and np.isnan(h[1]) and h[2] == 0


def crowd_kit_fit(item, rater, vote):
    """crowd-kit's Dawid-Skene: (posterior of present per task, rounds, sensitivity, specificity per worker)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from crowdkit.aggregation import DawidSkene

        m = DawidSkene(n_iter=100).fit(pd.DataFrame({"task": item, "worker": rater, "label": vote}))
    e = m.errors_
    return (m.probas_[1].sort_index().to_numpy(), len(m.loss_history_),
            np.array([e.loc[(w, 1), 1] for w in range(3)]), np.array([e.loc[(w, 0), 0] for w in range(3)]))


def test_the_dawid_skene_refit_is_crowd_kits_fit_on_every_resample():
    from emolia_bench.ceiling import dawid_skene_refit

    rng = np.random.default_rng(3)
    n = 300
    truth = rng.random(n) < 0.6
    item, rater = np.repeat(np.arange(n), 3), np.tile(np.arange(3), n)
    channels = np.array([(0.63, 0.88), (0.78, 0.67), (0.78, 0.37)])  # the real emo export's
    vote = (rng.random(3 * n) < np.where(truth[item], channels[rater, 0], 1 - channels[rater, 1])).astype(int)
    post, rounds, sens, spec = crowd_kit_fit(item, rater, vote)
    fit = dawid_skene_refit(item, rater, vote, n, 3, rounds)
    pi, s_bar, c_bar = fit(np.ones((1, n)))
    assert pi[0] == pytest.approx(post, abs=1e-10)
    assert s_bar[0] == pytest.approx(sens.mean(), abs=1e-10) and c_bar[0] == pytest.approx(spec.mean(), abs=1e-10)
    # a resample: each item drawn w times is crowd-kit's fit on the resample written out, item by item
    w = rng.multinomial(n, np.full(n, 1 / n)).astype(float)
    copies = np.repeat(np.arange(n), w.astype(int))
    rows = np.concatenate([np.flatnonzero(item == i) for i in copies])
    new_item = np.repeat(np.arange(len(copies)), 3)
    # the same number of rounds as on the data (the fit in every resample repeats the data's procedure)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from crowdkit.aggregation import DawidSkene

        m = DawidSkene(n_iter=rounds, tol=-np.inf).fit(pd.DataFrame({"task": new_item, "worker": rater[rows], "label": vote[rows]}))
    e = m.errors_
    pi_r, s_r, c_r = fit(w[None, :])
    assert pi_r[0][copies] == pytest.approx(m.probas_[1].sort_index().to_numpy(), abs=1e-10)
    assert s_r[0] == pytest.approx(np.mean([e.loc[(k, 1), 1] for k in range(3)]), abs=1e-10)
    assert c_r[0] == pytest.approx(np.mean([e.loc[(k, 0), 0] for k in range(3)]), abs=1e-10)


def test_mean_rating_reliability_by_hand():
    # items (1, 2), (3, 4), (5, 6): MSB = 2 * ((1.5-3.5)^2 + 0 + (5.5-3.5)^2) / 2 = 8, MSW = 6 * 0.25 / 3 = 0.5;
    # ICC(1) = (8 - 0.5) / (8 + 0.5) = 0.882353; Spearman-Brown at k = 2: (MSB - MSW) / MSB = 0.9375.
    # A fourth item rated once carries no within-item information and is left out.
    r = mean_rating_reliability(np.array([1, 2, 3, 4, 5, 6, 9.0]), np.array([0, 0, 1, 1, 2, 2, 3]), np.arange(4),
                                bootstrap=NONE)
    assert r["items"] == 3 and r["raters_per_item"] == 2
    assert r["icc1"]["value"] == pytest.approx(7.5 / 8.5, abs=1e-12)
    assert r["reliability_of_mean"]["value"] == pytest.approx(0.9375, abs=1e-12)
    assert r["correlation_ceiling"]["value"] == pytest.approx(0.9375 ** 0.5, abs=1e-12)
    one = mean_rating_reliability(np.array([1.0, 2.0]), np.array([0, 0]), np.arange(1), bootstrap=NONE)
    assert one["icc1"] is None  # one item: undefined


def run(name, majority, ds):
    return Run(name, None, SUBSETS["emolia-emo"], {"auroc_headline": {"macro_auroc": majority},
                                                    "against_rater_models": {"dawid_skene": {"macro_auroc": ds}}}, None)


def test_compare_flags_a_rank_flip_between_references():
    flipped = ranks_by_reference({"emolia-emo": [run("a", 0.60, 0.55), run("b", 0.58, 0.57)]})
    ds = flipped[flipped["reference"] == "dawid_skene"]
    assert ds["rank"].tolist() == [2.0, 1.0] and ds["rank_flip"].all()
    assert not flipped[flipped["reference"] == "majority"]["rank_flip"].any()
    same = ranks_by_reference({"emolia-emo": [run("a", 0.60, 0.59), run("b", 0.58, 0.57)]})
    assert not same["rank_flip"].any()


def test_the_benchmark_reports_soft_labels_calibration_and_the_ceiling(demo_scored):
    from sklearn.metrics import roc_auc_score

    out = demo_scored / "sham/emolia-emo"
    s = json.loads((out / "summary.json").read_text())
    pred = pd.read_csv(out / "predictions.csv")
    votes = pd.read_csv(demo_scored / "an/emolia-emo/votes.csv")
    key = ["file_name", "queried_emotion", "task_type"]
    q = votes.groupby(key)["binary"].mean().rename("q").reset_index()
    m = pred[pred["ok"]].merge(q, on=key)
    soft = s["soft_labels"]
    assert soft["items"] == len(m) and soft["items_tied"] == int((m["q"] == 0.5).sum())
    want = roc_auc_score(np.r_[np.ones(len(m)), np.zeros(len(m))], np.r_[m["similarity"], m["similarity"]],
                         sample_weight=np.r_[m["q"], 1 - m["q"]])
    assert soft["model"]["soft_auroc"]["value"] == pytest.approx(want, abs=1e-12)
    for scorer in ("model", "sampling_prior"):
        for figure in ("brier_vote_fraction", "jensen_shannon_vote_fraction", "brier_dawid_skene", "ece_vote_fraction"):
            f = soft[scorer][figure]
            assert f["value"] is not None and f["ci95"] is not None
    calibration = pd.read_csv(out / "calibration.csv")
    assert calibration.groupby("scorer")["rows"].sum().tolist() == [len(m), len(m)]
    ceiling = s["noise_ceiling"]
    assert ceiling["constant_predictor"]["value"] <= ceiling["ceiling"]["value"] <= 1
    assert set(s["against_rater_models"]) == {"dawid_skene", "one_coin_dawid_skene", "mace"}
    report = (out / "report.md").read_text()
    assert "## Soft labels and calibration" in report and "## The noise ceiling" in report


def test_a_probability_outside_0_1_in_rater_models_is_bad_input(tmp_path, demo_scored):
    import shutil

    an = tmp_path / "an"
    shutil.copytree(demo_scored / "an", an)
    path = an / "emolia-emo/rater_models.csv"
    models = pd.read_csv(path)
    models.loc[2, "dawid_skene_present_probability"] = 1.5
    models.to_csv(path, index=False)
    r = run_script("benchmark.py", "--analysis-root", an, "--output-dir", tmp_path / "out", "--subset", "emolia-emo")
    assert r.returncode == 2 and "rater_models.csv" in r.stderr and "row 3" in r.stderr
    assert "dawid_skene_present_probability" in r.stderr and not (tmp_path / "out").exists()


def test_the_headroom_band_reads_the_intervals():
    from emolia_bench.ceiling import headroom_band

    # ceiling 0.70: an agreement whose interval reaches it is at the ceiling, whatever the headroom
    assert headroom_band({"ci95": [0.6, 0.71]}, {"ci95": [0.5, 1.1]}, 0.70) == "at the ceiling"
    assert headroom_band({"ci95": [0.6, 0.65]}, {"ci95": [0.1, 0.5]}, 0.70) == "above the constant predictor"
    assert headroom_band({"ci95": [0.5, 0.55]}, {"ci95": [-0.4, -0.1]}, 0.70) == "below the constant predictor"
    assert headroom_band({"ci95": [0.55, 0.6]}, {"ci95": [-0.1, 0.2]}, 0.70) == "no better than a constant prediction"
    assert headroom_band({"ci95": None}, {"ci95": None}, 0.70) == "undefined"


def test_a_run_of_one_clip_gives_undefined_figures_not_a_crash(tmp_path, demo_scored):
    # one clip: four of the five folds are empty, so no threshold or Platt map can be fitted for
    # the fold that holds it (this crashed in the threshold search before)
    r = run_script("benchmark.py", "--analysis-root", demo_scored / "an", "--output-dir", tmp_path / "one",
                   "--subset", "emolia-emo", "--limit", "1")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "one/emolia-emo/summary.json").read_text())
    assert s["rows_evaluated_ok"] == 1
    assert s["thresholds_cv"]["per_prompt"]["balanced_accuracy"] is None
    assert s["soft_labels"]["sampling_prior"]["brier_vote_fraction"] == {"value": None, "ci95": None}


def test_a_malformed_dawid_skene_fit_in_summary_json_is_bad_input(tmp_path, demo_scored):
    import shutil

    an = tmp_path / "an"
    shutil.copytree(demo_scored / "an", an)
    path = an / "emolia-emo/summary.json"
    s = json.loads(path.read_text())
    s["rater_models"]["dawid_skene"]["iterations"] = "five"
    path.write_text(json.dumps(s))
    r = run_script("benchmark.py", "--analysis-root", an, "--output-dir", tmp_path / "out", "--subset", "emolia-emo")
    assert r.returncode == 2 and "summary.json" in r.stderr and "rater_models.dawid_skene.iterations" in r.stderr
    assert not (tmp_path / "out").exists()
