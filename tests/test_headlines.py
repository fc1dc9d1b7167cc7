"""Headlines no threshold was tuned for: cross-validated thresholds, AUROC and macro AUROC with
clip-bootstrap intervals, Spearman's ρ against graded labels. Checked against scikit-learn and
scipy, on the data and on an explicit resample of clips drawn with the same generator."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

from emolia_bench.ranking import auroc_with_intervals, spearman_by_group, spearman_with_interval
from emolia_bench.resampling import Bootstrap, percentile_interval
from emolia_bench.subsets import EMO
from emolia_bench.summary import Support
from emolia_bench.thresholds import clip_folds, cv_thresholds
from emolia_bench.vs_humans import graded_agreement


def test_a_held_out_fold_never_chooses_its_own_threshold():
    # Fold 0's own best threshold would be 0.8 (its positives score 0.85–0.9, negatives 0.7–0.75);
    # fold 1's is 0.2 (positives 0.2–0.3, negatives 0.0–0.1). Each fold must get the other's.
    scores = np.array([0.85, 0.9, 0.7, 0.75, 0.2, 0.3, 0.0, 0.1])
    truth = np.array([1, 1, 0, 0, 1, 1, 0, 0])
    folds = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    applied = cv_thresholds(truth, scores, folds, fallback=0.0)
    assert applied[:4].tolist() == [0.2] * 4 and applied[4:].tolist() == [0.85] * 4
    # per prompt: rows of prompt "q" learn only from "q" rows of the other fold
    groups = np.array(["p", "p", "q", "q", "p", "p", "q", "q"])
    truth_q = np.array([1, 1, 1, 0, 1, 1, 1, 0])
    scores_q = np.array([0.85, 0.9, 0.6, 0.5, 0.2, 0.3, 0.4, 0.35])
    applied = cv_thresholds(truth_q, scores_q, folds, fallback=0.0, groups=groups)
    # fold 0's "q" rows: fold 1's "q" rows are (1, 0.4), (0, 0.35) -> best threshold 0.4
    assert applied[2] == applied[3] == 0.4
    # fold 0's "p" rows: fold 1's "p" rows are all positive -> no per-prompt threshold, the fold's global one
    glob = cv_thresholds(truth_q, scores_q, folds, fallback=0.0)
    assert applied[0] == applied[1] == glob[0]


def test_clip_folds_keep_clips_whole_and_balanced():
    clips = np.repeat([f"c{i}" for i in range(23)], np.arange(1, 24) % 4 + 1)
    folds = clip_folds(clips, 5, seed=3)
    per_clip = pd.Series(folds).groupby(clips).nunique()
    assert (per_clip == 1).all()
    sizes = pd.Series(folds).groupby(clips).first().value_counts()
    assert sizes.max() - sizes.min() <= 1 and len(sizes) == 5
    assert (clip_folds(clips, 5, seed=3) == folds).all() and not (clip_folds(clips, 5, seed=4) == folds).all()


def explicit_clip_resamples(n_clips, draws, seed):
    """The draws Bootstrap.counts makes, written out: how often each clip was drawn, per resample."""
    idx = np.random.default_rng(seed).integers(0, n_clips, size=(draws, n_clips), dtype=np.int32)
    return np.stack([np.bincount(row, minlength=n_clips) for row in idx])


@pytest.mark.parametrize("tied", [True, False])
def test_auroc_and_macro_auroc_equal_scikit_learn_on_the_data_and_on_each_resample(tied):
    rng = np.random.default_rng(5)
    n = 120
    clip = np.sort(rng.integers(0, 50, n))
    clip_ids = pd.factorize(clip.astype(str), sort=True)[0]  # clips are named, and named clips sort as text
    truth = rng.integers(0, 2, n)
    scores = rng.normal(size=n) + truth * 0.5
    if tied:
        scores = np.round(scores, 1)
    cats = rng.choice(["a", "b", "c"], n)
    got = auroc_with_intervals(truth, scores, clip.astype(str), cats, bootstrap=Bootstrap(draws=150, seed=9))
    assert got["auroc"] == pytest.approx(roc_auc_score(truth, scores), abs=1e-12)
    assert got["macro_auroc"] == pytest.approx(np.mean([roc_auc_score(truth[cats == c], scores[cats == c]) for c in "abc"]),
                                               abs=1e-12)
    times = explicit_clip_resamples(clip_ids.max() + 1, 150, seed=9)[:, clip_ids]  # resamples × rows
    overall, macro = [], []
    for w in times:
        t, s, c = np.repeat(truth, w), np.repeat(scores, w), np.repeat(cats, w)
        overall.append(roc_auc_score(t, s) if t.min() != t.max() else np.nan)
        per = [roc_auc_score(t[c == k], s[c == k]) for k in "abc" if (c == k).any() and t[c == k].min() != t[c == k].max()]
        macro.append(np.mean(per) if per else np.nan)
    assert got["auroc_ci95"] == pytest.approx(percentile_interval(np.array(overall)), abs=1e-12)
    assert got["macro_auroc_ci95"] == pytest.approx(percentile_interval(np.array(macro)), abs=1e-12)


X_KINDS = {  # x against y, a mean rating with 3 levels
    "tied": lambda rng, n: np.round(rng.normal(size=n), 1),  # many levels with ties
    "untied": lambda rng, n: rng.normal(size=n),  # every row its own level
    "few": lambda rng, n: rng.integers(0, 4, n).astype(float),  # a rating too
    "continuous y": None,  # x few levels, y untied
}


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("kind", list(X_KINDS))
def test_spearman_equals_scipy_within_each_group_on_the_data_and_on_each_resample(groups, kind):
    # One group goes through spearman_with_interval, three through spearman_by_group; each
    # group's figures must equal scipy's on its rows, resample by resample, for every kind of x.
    rng = np.random.default_rng(6 + groups)
    n = 80 * groups
    clip = rng.integers(0, 25 * groups, n)
    clip_ids = pd.factorize(clip.astype(str), sort=True)[0]
    group = rng.choice([f"g{k}" for k in range(groups)], n)
    y = rng.integers(0, 3, n) / 2
    x = rng.normal(size=n) if kind == "continuous y" else X_KINDS[kind](rng, n)
    if kind == "continuous y":
        x, y = y, x
    if groups == 1:
        got = [{"group": "g0", **spearman_with_interval(x, y, clip.astype(str), bootstrap=Bootstrap(draws=80, seed=4))}]
    else:
        got = spearman_by_group(x, y, clip.astype(str), group, bootstrap=Bootstrap(draws=80, seed=4))
    assert [g["group"] for g in got] == sorted(set(group))
    times = explicit_clip_resamples(clip_ids.max() + 1, 80, seed=4)[:, clip_ids]
    for entry in got:
        g = group == entry["group"]
        assert entry["rho"] == pytest.approx(spearmanr(x[g], y[g])[0], abs=1e-12) and entry["n"] == g.sum()
        want = [spearmanr(np.repeat(x[g], w[g]), np.repeat(y[g], w[g]))[0] for w in times]
        assert entry["ci95"] == pytest.approx(percentile_interval(np.array(want)), abs=1e-12)


def test_graded_targets_and_the_human_reference_by_hand():
    # items A, B, C, D with ratings (0 not, 1 weakly, 2 strongly) by raters a, b, c
    ratings = {"A": [2, 2, 1], "B": [0, 1, 0], "C": [2, 1, 2], "D": [0, 0, 1]}
    sims = {"A": 0.9, "B": 0.1, "C": 0.5, "D": 0.2}
    scored = pd.DataFrame([{"file_name": f"{k}.mp3", "queried_emotion": "Awe", "task_type": "affirmative",
                            "similarity": sims[k], "clip": f"{k}.mp3"} for k in ratings])
    votes = pd.DataFrame([{"file_name": f"{k}.mp3", "queried_emotion": "Awe", "task_type": "affirmative", "rater": r,
                           "value": v} for k, vs in ratings.items() for r, v in zip("abc", vs, strict=True)])
    g = graded_agreement(scored, votes, EMO, bootstrap=Bootstrap(draws=200, seed=1), support=Support(30))
    means = [np.mean(ratings[k]) for k in ratings]  # 5/3, 1/3, 5/3, 1/3
    assert g["overall"]["rho"] == pytest.approx(spearmanr(list(sims.values()), means)[0])
    # each vote against the mean of the other two: A's a -> (2+1)/2, b -> (2+1)/2, c -> 2, ...
    own, others, model = [], [], []
    for k, vs in ratings.items():
        for v in vs:
            own.append(v)
            others.append((sum(vs) - v) / 2)
            model.append(sims[k])
    assert g["human_reference"]["human"]["rho"] == pytest.approx(spearmanr(own, others)[0])
    assert g["human_reference"]["model"]["rho"] == pytest.approx(spearmanr(model, others)[0])
    assert g["human_reference"]["human"]["n"] == 12


def reference_cv_thresholds(truth, scores, folds, fallback, groups=None):
    """Cross-validated thresholds written from the definition, with scikit-learn's balanced
    accuracy: for each fold, try every training score as the threshold (lowest first, keep the
    first best) on the other folds' rows; per group, the same within the group's training rows,
    falling back to the fold's global threshold when they lack a class."""
    from sklearn.metrics import balanced_accuracy_score

    def best(t, s):
        if len(t) == 0 or t.min() == t.max():
            return None
        cand = np.unique(s)
        scores_ = [balanced_accuracy_score(t, (s >= c).astype(int)) for c in cand]
        return cand[int(np.argmax(scores_))]

    applied = np.empty(len(truth))
    for f in np.unique(folds):
        b = best(truth[folds != f], scores[folds != f])
        applied[folds == f] = fallback if b is None else b
        if groups is not None:
            for g in np.unique(groups):
                train, test = (folds != f) & (groups == g), (folds == f) & (groups == g)
                b = best(truth[train], scores[train])
                if b is not None:
                    applied[test] = b
    return applied


@pytest.mark.parametrize("per_prompt", [False, True])
def test_cv_interval_re_runs_the_whole_cross_validation_on_each_resample(per_prompt):
    from sklearn.metrics import balanced_accuracy_score

    from emolia_bench.thresholds import cv_balanced_accuracy

    rng = np.random.default_rng(11)
    n_clips, draws = 40, 60
    clip = np.repeat(np.arange(n_clips), rng.integers(1, 4, n_clips))
    n = len(clip)
    prompts = rng.choice(["p", "q", "r"], n)
    truth = (rng.random(n) < np.where(prompts == "p", 0.8, 0.4)).astype(int)
    scores = np.round(rng.normal(size=n) + 0.7 * truth, 1)  # ties
    names = np.array([f"c{i:02d}" for i in clip])  # names sort as the numbers do
    folds = clip_folds(names, 4, seed=2)
    groups = prompts if per_prompt else None
    point, got, applied = cv_balanced_accuracy(truth, scores, names, folds, 0.0, groups,
                                               bootstrap=Bootstrap(draws=draws, seed=4))
    expected = reference_cv_thresholds(truth, scores, folds, 0.0, groups)
    assert applied.tolist() == expected.tolist()
    assert point == pytest.approx(balanced_accuracy_score(truth, scores >= expected), abs=1e-12)
    # each resample, written out as the rows it holds, cross-validated from scratch
    stats = []
    for w in explicit_clip_resamples(n_clips, draws, seed=4)[:, clip]:
        t, s, f = np.repeat(truth, w), np.repeat(scores, w), np.repeat(folds, w)
        g = np.repeat(prompts, w) if per_prompt else None
        stats.append(balanced_accuracy_score(t, s >= reference_cv_thresholds(t, s, f, 0.0, g))
                     if t.min() != t.max() else np.nan)
    assert got == pytest.approx(np.array(stats), abs=1e-12, nan_ok=True)


def test_a_score_that_only_knows_each_prompts_base_rate_gains_on_pooled_auroc_but_not_on_macro():
    # The report found a prevalence-only score at pooled AUROC 0.660 (macro 0.491). Here by
    # construction: within a prompt every score is equal, so each prompt's AUROC is exactly 0.5
    # (all pairs tied); pooled, prompts with more positives score higher, which AUROC rewards.
    rng = np.random.default_rng(2)
    prompts = np.repeat(["p", "q", "r"], 200)
    rate = {"p": 0.9, "q": 0.5, "r": 0.1}
    truth = (rng.random(600) < np.vectorize(rate.get)(prompts)).astype(int)
    score = np.vectorize(rate.get)(prompts).astype(float)
    got = auroc_with_intervals(truth, score, np.arange(600).astype(str), prompts, bootstrap=Bootstrap(draws=50, seed=1))
    assert got["macro_auroc"] == 0.5
    assert got["auroc"] == pytest.approx(roc_auc_score(truth, score), abs=1e-12) and got["auroc"] > 0.7
