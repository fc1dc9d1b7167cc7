"""Metric values on hand-computed fixtures, and shared invariants every metric must satisfy."""

import json

import numpy as np
import pandas as pd
import pytest

from emolia_bench.metrics import (
    band,
    binary_metrics,
    check_binary,
    confusion,
    ranking_metrics,
    slice_intervals,
)
from emolia_bench.resampling import Bootstrap


def balanced_accuracy_interval(t, p, clips, bootstrap=None):
    """The clip-bootstrap interval of one slice holding every row."""
    t, p = np.asarray(t), np.asarray(p)
    bootstrap = bootstrap or Bootstrap(draws=1000, seed=0)
    got = slice_intervals(t, p, np.asarray(clips), [np.zeros(len(t), np.int64)], bootstrap=bootstrap)[0][0]
    return got[0] if got else None


def test_differs_from_chance_is_fishers_exact_test_and_q_values_are_benjamini_hochberg():
    # p written out: the hypergeometric probability of each table with the observed margins,
    # summed over tables no more likely than the observed one (two-sided Fisher, by hand)
    from math import comb

    from emolia_bench.metrics import bh_q_values, metrics_of

    def fisher_by_hand(tp, fn, fp, tn):
        row1, col1, n = tp + fn, tp + fp, tp + fn + fp + tn
        prob = lambda a: comb(row1, a) * comb(n - row1, col1 - a) / comb(n, col1)  # noqa: E731
        lo, hi = max(0, col1 - (n - row1)), min(row1, col1)
        observed = prob(tp)
        return min(1.0, sum(prob(a) for a in range(lo, hi + 1) if prob(a) <= observed * (1 + 1e-7)))

    t = np.array([1] * 25 + [0] * 25)
    p = np.array([1] * 18 + [0] * 7 + [1] * 9 + [0] * 16)  # tp 18, fn 7, fp 9, tn 16
    row = metrics_of(t, p, p.astype(float), (None, 0.1), min_class_rows=20)
    assert row.balanced_accuracy_p_chance == pytest.approx(fisher_by_hand(18, 7, 9, 16), rel=1e-9)
    assert metrics_of(t, p, p.astype(float), (None, 0.1), min_class_rows=26).balanced_accuracy_p_chance is None
    # Benjamini–Hochberg by hand: q_(k) = min over l >= k of p_(l) * m / l
    ps = [0.01, None, 0.04, 0.03, 0.5]
    # sorted 0.01, 0.03, 0.04, 0.5 -> p·m/rank 0.04, 0.06, 0.0533, 0.5 -> running minimum from the top
    assert bh_q_values(ps) == pytest.approx([0.04, None, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])

# truth 1 1 1 1 0 0 0 ; pred 1 1 0 0 1 0 0
#  tp=2 fn=2 fp=1 tn=2 -> accuracy 4/7, recall 1/2, specificity 2/3, BA 7/12,
#  precision 2/3, F1 = 2·(2/3)(1/2)/(2/3+1/2) = (2/3)/(7/6) = 4/7
T = [1, 1, 1, 1, 0, 0, 0]
P = [1, 1, 0, 0, 1, 0, 0]


def test_hand_computed_values():
    m = binary_metrics(T, P)
    assert (m["tp"], m["fp"], m["tn"], m["fn"], m["n"]) == (2.0, 1.0, 2.0, 2.0, 7.0)
    assert m["accuracy"] == pytest.approx(4 / 7)
    assert m["recall"] == 0.5 and m["specificity"] == pytest.approx(2 / 3)
    assert m["balanced_accuracy"] == pytest.approx(7 / 12)
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(4 / 7)


def test_undefined_cases_are_none():
    one_class = binary_metrics([1, 1, 1], [0, 0, 0])  # no negatives, no positive predictions
    assert one_class["balanced_accuracy"] is None and one_class["specificity"] is None
    assert one_class["precision"] is None and one_class["f1"] is None and one_class["recall"] == 0.0
    empty = binary_metrics([], [])
    assert empty["n"] == 0.0 and empty["accuracy"] is None and empty["balanced_accuracy"] is None
    zero = binary_metrics([1, 0], [0, 1])  # precision 0, recall 0 -> F1 undefined
    assert zero["precision"] == 0.0 and zero["recall"] == 0.0 and zero["f1"] is None
    assert ranking_metrics([1, 1], [0.1, 0.2]) == {"auroc": None, "average_precision": None}


def test_ranking_metrics_hand_computed():
    # positives score 0.9, 0.4; negatives 0.5, 0.1: pairs (pos > neg): (0.9>0.5)(0.9>0.1)(0.4>0.1) = 3 of 4
    # AP: ranks 0.9(+) 0.5(-) 0.4(+) 0.1(-): precision at the positives 1/1 and 2/3 -> (1 + 2/3)/2 = 5/6
    r = ranking_metrics([1, 0, 1, 0], [0.9, 0.5, 0.4, 0.1])
    assert r["auroc"] == pytest.approx(0.75) and r["average_precision"] == pytest.approx(5 / 6)


def test_validator_rejects_bad_input():
    for bad in ([2, 0], [0.5, 1]):
        with pytest.raises(ValueError):
            check_binary(bad, [0, 1])
    with pytest.raises(ValueError):
        check_binary([0, 1], [0])
    with pytest.raises(ValueError):
        check_binary([0, 1], scores=[0.1, float("nan")])


def test_bands():
    assert [band(x) for x in (0.5, 0.55, 0.649, 0.7, 0.8, 0.85, None)] == [
        "Bad", "Weak", "Weak", "Medium", "Good", "Excellent", "n/a"]


RNG = np.random.default_rng(0)
CASES = [(RNG.integers(0, 2, n), RNG.integers(0, 2, n)) for n in (2, 5, 17, 100)] + [(np.array(T), np.array(P))]


@pytest.mark.parametrize("t,p", CASES)
def test_shared_invariants(t, p):
    m = binary_metrics(t, p)
    # counts add up and agree with scikit-learn's confusion matrix
    from sklearn.metrics import confusion_matrix

    assert m["tp"] + m["fp"] + m["tn"] + m["fn"] == m["n"] == len(t)
    assert confusion(t, p) == (m["tp"], m["fp"], m["tn"], m["fn"])
    (tn, fp), (fn, tp) = confusion_matrix(t, p, labels=[0, 1])
    assert (tp, fp, tn, fn) == confusion(t, p)
    # every defined value is a fraction
    for k in ("accuracy", "balanced_accuracy", "precision", "recall", "specificity", "f1"):
        assert m[k] is None or 0.0 <= m[k] <= 1.0
    # perfect predictions score 1 wherever defined; inverted predictions score 0 on BA
    perfect = binary_metrics(t, t)
    assert perfect["accuracy"] == 1.0
    if t.min() != t.max():
        assert perfect["balanced_accuracy"] == 1.0 and binary_metrics(t, 1 - t)["balanced_accuracy"] == 0.0
        from sklearn.metrics import balanced_accuracy_score
        assert m["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(t, p))
    # swapping the class labels swaps recall and specificity, and leaves BA unchanged
    s = binary_metrics(1 - t, 1 - p)
    assert s["recall"] == m["specificity"] and s["balanced_accuracy"] == m["balanced_accuracy"]
    # order of rows never matters
    perm = RNG.permutation(len(t))
    assert binary_metrics(t[perm], p[perm]) == m


def test_clip_bootstrap_moves_rows_of_a_clip_together():
    # Two clips, each with one positive and one negative row: clip A all right, clip B all wrong.
    # Any resample of clips has both classes, and its BA is the share of A draws: 0, 0.5 or 1.
    t, p = [1, 0, 1, 0], [1, 0, 0, 1]
    ci = balanced_accuracy_interval(t, p, ["A", "A", "B", "B"], bootstrap=Bootstrap(draws=1000, seed=0))
    assert ci == (0.0, 1.0)
    # with each row its own clip, resamples can lack a class; defined draws still bracket 0.5
    ci_rows = balanced_accuracy_interval(t, p, ["a", "b", "c", "d"], bootstrap=Bootstrap(draws=1000, seed=0))
    assert ci_rows[0] <= 0.5 <= ci_rows[1]
    assert balanced_accuracy_interval([1, 1], [1, 0], ["a", "b"]) is None


@pytest.mark.parametrize("seed", range(6))
def test_ranking_metrics_equal_scikit_learn_with_ties(seed):
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    t = rng.integers(0, 2, n)
    t[0], t[-1] = 0, 1
    scores = np.round(rng.normal(size=n), int(rng.integers(0, 3)))  # coarse rounding makes many ties
    r = ranking_metrics(t, scores)
    assert r["auroc"] == pytest.approx(roc_auc_score(t, scores), abs=1e-12)
    assert r["average_precision"] == pytest.approx(average_precision_score(t, scores), abs=1e-12)


def test_slice_report_shares_one_resample_and_matches_single_slice_interval():
    from emolia_bench.metrics import slice_report

    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"majority_present": rng.integers(0, 2, n), "pred_present": rng.integers(0, 2, n),
                          "similarity": rng.normal(size=n), "clip": rng.integers(0, 150, n).astype(str),
                          "all_agree_binary": rng.random(n) < 0.3, "kind": rng.choice(["a", "b", "c"], n)})
    overall, unanimous, tables = slice_report(frame, ["kind"], bootstrap=Bootstrap(draws=1000, seed=9))
    single = balanced_accuracy_interval(frame["majority_present"], frame["pred_present"], frame["clip"], bootstrap=Bootstrap(draws=1000, seed=9))
    assert overall.ci95 == single
    t = tables["kind"]
    assert t["kind"].tolist() == ["a", "b", "c"] and t["n"].sum() == n
    for _, row in t.iterrows():
        sel = frame["kind"] == row["kind"]
        assert row["balanced_accuracy"] == binary_metrics(frame.loc[sel, "majority_present"], frame.loc[sel, "pred_present"])["balanced_accuracy"]
        assert row["balanced_accuracy_ci_low"] <= row["balanced_accuracy"] <= row["balanced_accuracy_ci_high"]
    assert unanimous.n == frame["all_agree_binary"].sum()


def test_slice_intervals_equal_an_explicit_clip_resample():
    # Independent derivation: draw the clips with the same generator calls, weight each row by
    # how often its clip was drawn, and compute every slice's balanced accuracy draw by draw.
    # Single-row clips with equal rows share a "type" inside slice_intervals; that must not
    # change a number.
    from emolia_bench.resampling import percentile_interval

    rng = np.random.default_rng(3)
    n, n_clips, draws = 60, 40, 200
    t, p = rng.integers(0, 2, n), rng.integers(0, 2, n)
    clip = np.concatenate([np.arange(n_clips), rng.integers(0, n_clips, n - n_clips)])  # some multi-row clips
    family = rng.integers(-1, 3, n)  # three slices, some rows in none
    got = slice_intervals(t, p, clip, [np.zeros(n, np.int64), family], bootstrap=Bootstrap(draws=draws, seed=11))
    idx = np.random.default_rng(11).integers(0, n_clips, size=(draws, n_clips), dtype=np.int32)
    times = np.stack([np.bincount(row, minlength=n_clips) for row in idx])[:, clip]  # draws × rows
    for f, codes in enumerate([np.zeros(n, np.int64), family]):
        for g in range(int(codes.max()) + 1):
            sel = codes == g
            w = times[:, sel]
            tt, pp = t[sel], p[sel]
            with np.errstate(invalid="ignore", divide="ignore"):
                ba = ((w * (tt * pp)).sum(1) / (w * tt).sum(1) + (w * ((1 - tt) * (1 - pp))).sum(1) / (w * (1 - tt)).sum(1)) / 2
            if not (tt.any() and (1 - tt).any()):
                assert got[f][g] is None
                continue
            interval, mde = got[f][g]
            assert interval == pytest.approx(percentile_interval(ba), abs=1e-12), (f, g)
            # the detectable difference: z_0.975 + z_0.8 standard deviations of these resamples
            fin = ba[np.isfinite(ba)]
            assert mde == pytest.approx((1.959963984540054 + 0.8416212335729143) * fin.std(ddof=1), abs=1e-12)
    assert sum(v is not None for v in got[1]) == 3  # every slice had both classes


def test_small_slices_have_class_counts_and_no_interval_below_min_class_rows():
    from emolia_bench.metrics import slice_report

    # slice "few": 10 positives and 2 negatives; slice "many": 25 of each; clips of one row
    kind = ["few"] * 12 + ["many"] * 50
    truth = [1] * 10 + [0] * 2 + [1] * 25 + [0] * 25
    frame = pd.DataFrame({"majority_present": truth, "pred_present": np.resize([1, 0, 0], 62),
                          "similarity": np.linspace(-1, 1, 62), "clip": [f"c{i}" for i in range(62)],
                          "all_agree_binary": True, "kind": kind})
    _, _, tables = slice_report(frame, ["kind"], bootstrap=Bootstrap(draws=1000, seed=1), min_class_rows=20)
    t = tables["kind"].set_index("kind")
    assert (t.loc["few", "n_positive"], t.loc["few", "n_negative"]) == (10, 2)
    assert (t.loc["many", "n_positive"], t.loc["many", "n_negative"]) == (25, 25)
    assert pd.isna(t.loc["few", "balanced_accuracy_ci_low"]) and t.loc["few", "balanced_accuracy"] is not None
    assert not pd.isna(t.loc["many", "balanced_accuracy_ci_low"])
    _, _, tables = slice_report(frame, ["kind"], bootstrap=Bootstrap(draws=1000, seed=1), min_class_rows=2)
    assert not pd.isna(tables["kind"].set_index("kind").loc["few", "balanced_accuracy_ci_low"])


def test_report_marks_small_slices():
    from emolia_bench.reports import too_small

    assert too_small({"n_positive": 101.0, "n_negative": 2.0}, 20) == "too small (2 negatives)"
    assert too_small({"n_positive": 1.0, "n_negative": 50.0}, 20) == "too small (1 positive)"
    assert too_small({"n_positive": 0.0, "n_negative": 50.0}, 20) == "n/a (no positives)"
    assert too_small({"n_positive": 20.0, "n_negative": 20.0}, 20) is None


def test_verdict_is_relative_to_chance_and_the_humans_and_never_flatters_an_interval_with_chance():
    from emolia_bench.metrics import verdict

    # a high point value whose interval still reaches 0.5 is no better than chance
    assert verdict(0.75, (0.45, 0.95)) == "indistinguishable from chance"
    assert verdict(0.75, (0.5, 0.95)) == "indistinguishable from chance"  # 0.5 itself is inside
    assert verdict(0.40, (0.30, 0.49)) == "below chance"
    assert verdict(0.60, (0.52, 0.68)) == "above chance"
    # against the humans' 0.562: the interval below it, around it, above it
    assert verdict(0.54, (0.51, 0.56), human=0.562) == "above chance, below the humans (0.562)"
    assert verdict(0.57, (0.53, 0.60), human=0.562) == "above chance, level with the humans (0.562)"
    assert verdict(0.62, (0.58, 0.66), human=0.562) == "above chance, above the humans (0.562)"
    # too few rows of a class, or no interval, or no value
    assert verdict(0.75, (0.6, 0.9), enough=False) == "too few rows of a class"
    assert verdict(0.75, None) == "too few rows of a class"
    assert verdict(None, None) == "n/a"


def test_a_random_scorer_on_a_small_sample_is_never_rated_above_chance(demo_scored, tmp_path):
    # The report found: `--min-raters 2 --limit 50` printed "balanced accuracy 0.750 (Good)" for the
    # sham scorer on 4 negatives. Whatever the sample, the sham scorer (a hash: no information)
    # must read "too few rows of a class" or "indistinguishable from chance" everywhere.
    from .conftest import run_script

    r = run_script("benchmark.py", "--analysis-root", demo_scored / "an", "--output-dir", tmp_path / "b",
                   "--min-raters", "2", "--limit", "50", "--no-figures")
    assert r.returncode == 0, r.stderr
    allowed = {"too few rows of a class", "indistinguishable from chance", "n/a"}
    for subset in ("emolia-emo", "emolia-dim"):
        s = json.loads((tmp_path / "b" / subset / "summary.json").read_text())
        verdicts = [s["overall"]["verdict"], s["unanimous_subset"]["verdict"], s["auroc_headline"]["auroc_verdict"],
                    s["auroc_headline"]["macro_auroc_verdict"],
                    *[s["thresholds_cv"][k]["verdict"] for k in ("global", "per_prompt") if k in s["thresholds_cv"]]]
        assert set(verdicts) <= allowed, (subset, verdicts)
        report = (tmp_path / "b" / subset / "report.md").read_text()
        assert "above chance" not in report.replace("never reads better", "")
    assert "Good" not in r.stdout and "Excellent" not in r.stdout
