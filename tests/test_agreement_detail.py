"""Agreement figures with their uncertainty, support, slices and rater profiles (issue: a referee
should see how much each figure rests on).

Hand-derived expectations use the fixture of test_agreement.py:

    item  a  b  c
    i1    1  1  1
    i2    1  0  1
    i3    0  0  0
    i4    0  1  1
    i5    1  0  .
    i6    .  .  1

The statistics that feed the intervals are checked against their libraries (scikit-learn,
statsmodels, krippendorff) on the full data, and the intervals against an explicit resample of
items computed with those libraries.
"""

import json
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from emolia_bench import agreement as ag
from emolia_bench.raters import clip_durations_ms, rater_profiles
from emolia_bench.resampling import Bootstrap
from emolia_bench.subsets import EMO

from .conftest import REPO, WORKED, run_script
from .test_agreement import RATERS, votes_frame


def point(figure: ag.Resampled) -> np.ndarray:
    """A figure's statistics on the data itself (every unit once), as the package reports them."""
    values = ag.point_values([figure])
    return np.array([np.nan if values[n] is None else values[n] for n in figure.names])


def random_panel(rng, n_items, n_raters=3, n_values=3, sparse=False):
    rows = []
    for i in range(n_items):
        raters = rng.choice(n_raters, size=int(rng.integers(2, n_raters + 1)) if sparse else n_raters, replace=False)
        rows += [(i, int(r), int(rng.integers(0, n_values))) for r in raters]
    v = pd.DataFrame(rows, columns=["item", "rater", "value"])
    v["binary"] = (v["value"] >= 1).astype(np.int64)
    return v


# ---- support: items and comparisons, reliability ---------------------------------------------


def test_every_figure_carries_its_items_and_comparisons():
    votes = votes_frame()
    panel = ag.Panel(votes, ordinal=False)
    ci = ag.intervals(ag.agreement_figures(panel, 2), Bootstrap(draws=1000, seed=1))
    agreement = ag.human_agreement(panel, RATERS, 2, ci)
    d = ag.agreement_detail(panel, RATERS, 2, agreement, ci, min_items=5)
    f = d["figures"]
    # complete items i1–i4: 4 items, 3 rater pairs each = 12 comparisons; Fleiss: 3 pairs per item
    assert (f["pairwise_binary_kappa_mean"]["n_items"], f["pairwise_binary_kappa_mean"]["n_comparisons"]) == (4, 12)
    assert (f["fleiss_binary_kappa"]["n_items"], f["fleiss_binary_kappa"]["n_comparisons"]) == (4, 12)
    assert (f["exact_3way_binary"]["n_items"], f["exact_3way_binary"]["n_comparisons"]) == (4, 4)
    # items with ≥2 raters i1–i5: pairs 3+3+3+3+1 = 13
    assert (f["krippendorff_alpha_binary"]["n_items"], f["krippendorff_alpha_binary"]["n_comparisons"]) == (5, 13)
    assert (f["human_pairwise_accuracy"]["n_items"], f["human_pairwise_accuracy"]["n_comparisons"]) == (5, 13)
    # LOO: i1 and i3 give 3 comparisons each; i2 only b's vote (a's and c's others tie), i4 only a's: 8
    assert (f["human_loo_accuracy"]["n_items"], f["human_loo_accuracy"]["n_comparisons"]) == (4, 8)
    # below min_items = 5: the complete-item figures and LOO; at 5: α and the items-weighted pairwise accuracy
    assert not f["fleiss_binary_kappa"]["reliable"] and not f["human_loo_accuracy"]["reliable"]
    assert f["krippendorff_alpha_binary"]["reliable"] and f["human_pairwise_accuracy_items_weighted"]["reliable"]
    # upstream's unweighted mean over pairs weighs a–c (4 shared items: i1–i4) like a–b (5): its
    # smallest pair is below 5, so it is not reliable although the figure rests on 5 items
    assert f["human_pairwise_accuracy"]["min_pair_items"] == 4 and not f["human_pairwise_accuracy"]["reliable"]
    assert "min_pair_items" not in f["human_pairwise_accuracy_items_weighted"]
    # upstream's pairwise mean weights the pairs equally: a–b 2/5, a–c 3/4, b–c 3/4 -> 1.9/3;
    # pooled over the 13 comparisons: 3 + 1 + 3 + 1 + 0 agreements -> 8/13
    assert f["human_pairwise_accuracy"]["value"] == pytest.approx(1.9 / 3)
    assert f["human_pairwise_accuracy_items_weighted"]["value"] == pytest.approx(8 / 13)
    # every pair shares the same 4 complete items, so the items-weighted κ mean is the plain mean
    assert f["pairwise_binary_kappa_mean_items_weighted"]["value"] == pytest.approx(agreement["pairwise_binary_kappa"]["mean"])
    assert f["pairwise_binary_kappa_mean"]["value"] == agreement["pairwise_binary_kappa"]["mean"]
    # the ceiling's intervals in the upstream block are the detail's
    assert f["human_pairwise_accuracy"]["ci95"] == list(agreement["human_pairwise_accuracy_ci95"])
    assert f["human_loo_accuracy"]["ci95"] == list(agreement["human_loo_accuracy_ci95"])
    assert "conditional on these raters" in d["intervals"]


# ---- the statistics behind the intervals equal their libraries ------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_kappa_statistics_equal_scikit_learn(seed):
    from sklearn.metrics import cohen_kappa_score

    v = random_panel(np.random.default_rng(seed), 40, n_raters=4, sparse=True)
    pairs = ag.co_rated_pairs(v, ("binary", "value"))
    want = {"binary": [], "ordinal": [], "quadratic": []}
    sizes = []
    for _, g in pairs.groupby(["a", "b"]):
        sizes.append(len(g))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want["binary"].append(cohen_kappa_score(g["binary_a"], g["binary_b"]))
            want["ordinal"].append(cohen_kappa_score(g["value_a"], g["value_b"]))
            want["quadratic"].append(cohen_kappa_score(g["value_a"], g["value_b"], weights="quadratic"))
    got = point(ag.kappa_resampled(pairs, "binary", 2, "k"))
    ok = np.isfinite(want["binary"])
    assert got[0] == pytest.approx(np.mean(np.array(want["binary"])[ok]), abs=1e-12)
    assert got[1] == pytest.approx(np.average(np.array(want["binary"])[ok], weights=np.array(sizes)[ok]), abs=1e-12)
    got = point(ag.kappa_resampled(pairs, "value", 3, "k", "q"))
    assert got[0] == pytest.approx(np.nanmean(want["ordinal"]), abs=1e-12)
    assert got[2] == pytest.approx(np.nanmean(want["quadratic"]), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_fleiss_statistic_equals_statsmodels(seed):
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    v = random_panel(np.random.default_rng(seed), 30)
    bin3, val3 = ag.complete_matrix(v, "binary", 3), ag.complete_matrix(v, "value", 3)
    got = point(ag.fleiss_resampled({"b": (bin3, 2), "o": (val3, 3)}, np.arange(30)))
    assert got[0] == pytest.approx(fleiss_kappa(aggregate_raters(bin3)[0]), abs=1e-12)
    assert got[1] == pytest.approx(fleiss_kappa(aggregate_raters(val3)[0]), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_alpha_statistic_equals_krippendorff(seed):
    import krippendorff

    v = random_panel(np.random.default_rng(seed), 50, n_raters=5, sparse=True)  # 2–5 raters per item
    got = point(ag.alpha_resampled(v, {"n": ("binary", 2, "nominal"), "o": ("value", 3, "ordinal")}))
    data = np.full((5, 50), np.nan)
    data[v["rater"], v["item"]] = v["value"]
    assert got[1] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal",
                                                      value_domain=[0, 1, 2]), abs=1e-12)
    data[v["rater"], v["item"]] = v["binary"]
    assert got[0] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal",
                                                      value_domain=[0, 1]), abs=1e-12)


# ---- the intervals equal an explicit resample of items --------------------------------------


def test_intervals_equal_an_explicit_resample_computed_with_the_libraries():
    import krippendorff
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    from emolia_bench.resampling import percentile_interval

    n, draws, seed = 25, 200, 7
    v = random_panel(np.random.default_rng(11), n, n_values=2)  # every item rated by all three
    pairs = ag.co_rated_pairs(v)
    bin3 = ag.complete_matrix(v, "binary", 3)
    got = ag.intervals([ag.kappa_resampled(pairs, "binary", 2, "kappa"),
                        ag.fleiss_resampled({"fleiss": (bin3, 2)}, np.arange(n)),
                        ag.alpha_resampled(v, {"alpha": ("binary", 2, "nominal")})], Bootstrap(draws=draws, seed=seed))
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n), dtype=np.int32)  # the same draws
    stats = {"kappa": [], "fleiss": [], "alpha": []}
    for row in idx:
        m = bin3[row]  # the resampled items, each drawn item a new unit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats["kappa"].append(np.nanmean([cohen_kappa_score(m[:, i], m[:, j]) for i, j in ((0, 1), (0, 2), (1, 2))]))
            stats["fleiss"].append(fleiss_kappa(aggregate_raters(m)[0]))
            stats["alpha"].append(krippendorff.alpha(reliability_data=m.T.astype(float), level_of_measurement="nominal",
                                                     value_domain=[0, 1]))
    for name, values in stats.items():
        assert got[name] == pytest.approx(percentile_interval(np.array(values, dtype=float)), abs=1e-9), name


# ---- slices ----------------------------------------------------------------------------------


def test_agreement_within_slices():
    votes = votes_frame()
    slice_of_item = pd.Series(["x", "x", "x", "y", "y", "y"])
    rows = ag.agreement_by_slice(votes, slice_of_item, ordinal=False, n_values=2, panel=3, min_items=3,
                                  bootstrap=Bootstrap(draws=1000, seed=1))
    x, y = rows
    assert (x["slice"], y["slice"]) == ("x", "y")
    # x: i1–i3, all complete; all equal on i1 and i3 -> 2/3. y: i4 complete (not all equal), i5 two raters
    assert (x["n_items_two_or_more_raters"], x["n_items_complete"], x["exact_agreement_binary"]) == (3, 3, pytest.approx(2 / 3))
    assert (y["n_items_two_or_more_raters"], y["n_items_complete"], y["exact_agreement_binary"]) == (2, 1, 0.0)
    assert x["reliable"] and not y["reliable"]
    # α within a slice is α over that slice's votes alone
    assert x["alpha_binary"] == ag.krippendorff_alpha(votes[votes["item"] < 3], "binary", 2, "nominal")
    lo, hi = x["alpha_binary_ci95"]
    assert -1 <= lo <= hi <= 1


# ---- rater profiles --------------------------------------------------------------------------


def test_rater_profiles_by_hand(monkeypatch):
    from emolia_bench import raters

    monkeypatch.setattr(raters, "MIN_RATINGS", 1)  # the rule itself, on a fixture of five votes a rater
    votes = votes_frame()
    rt = {0: [500, 800, 1200, 3000, 400], 1: [2000] * 4 + [2500], 2: [1500] * 5}
    clean = votes.copy()
    clean["reaction_time_ms"] = [rt[r].pop(0) for r in votes["rater"]]
    clip_ms = np.array([1000.0] * 5 + [np.nan])  # i6's clip duration unknown
    t = rater_profiles(clean, votes, RATERS, clip_ms).set_index("rater")
    # a: votes 1,1,0,0,1 -> 3/5 present; LOO: i1 ✓, i3 ✓, i4 ✗ (others 1,1) -> 2/3 of 3
    assert t.loc["a", "items_rated"] == 5 and t.loc["a", "share_present"] == pytest.approx(0.6)
    assert (t.loc["a", "loo_comparisons"], t.loc["a", "agreement_with_others_majority"]) == (3, pytest.approx(2 / 3))
    # c: only i1 and i3 are comparisons (i2, i4: the others tie) -> 2 of 2
    assert (t.loc["c", "loo_comparisons"], t.loc["c", "agreement_with_others_majority"]) == (2, 1.0)
    # a's reaction times 500, 800, 1200, 3000, 400: median 800, 3/5 under 1 s and under the 1 s clips
    assert t.loc["a", "median_reaction_time_ms"] == 800 and t.loc["a", "share_under_1s"] == pytest.approx(0.6)
    assert t.loc["a", "share_faster_than_clip"] == pytest.approx(0.6) and t.loc["a", "clip_duration_known"] == 5
    assert t.loc["c", "clip_duration_known"] == 4  # c's vote on i6 has no known clip
    # κ a–b on i1–i5: a 1,1,0,0,1; b 1,0,0,1,0 -> p_o = 2/5, p_e = (3·2 + 2·3)/25 = 12/25, κ = -2/13
    assert t.loc["a", "kappa_binary_vs_b"] == pytest.approx(-2 / 13) == t.loc["b", "kappa_binary_vs_a"]
    assert pd.isna(t.loc["a", "kappa_binary_vs_a"])
    # rule: a is fast (median under 1 s); b (0.4) and c (0.8) are 0.3 from the others' median share
    assert t["flagged"].tolist() == [True, True, True]
    assert "fast" in t.loc["a", "flag_reasons"] and "present share" not in t.loc["a", "flag_reasons"]
    assert "present share 0.40" in t.loc["b", "flag_reasons"] and "present share 0.80" in t.loc["c", "flag_reasons"]


def test_a_rater_with_few_ratings_is_neither_pointed_out_nor_counted():
    from emolia_bench.raters import MIN_RATINGS, flag

    # A and B rate 100 items each (present shares 0.50 and 0.65); C rates 3, all "absent", fast.
    # Counted, C would pull the others' median share for B to 0.25 (0.40 away: pointed out);
    # not counted, B's only peer is A at 0.50 (0.15 away: not pointed out).
    table = pd.DataFrame({"rater": ["A", "B", "C"], "items_rated": [100, 100, 3], "share_present": [0.5, 0.65, 0.0],
                          "median_reaction_time_ms": [3000.0, 3000.0, 300.0], "share_under_1s": [0.0, 0.0, 1.0],
                          "loo_comparisons": [0, 0, 0], "agreement_with_others_majority": [None, None, None]})
    assert MIN_RATINGS == 30
    assert [flag(table, i) for i in range(3)] == [(False, ""), (False, ""), (False, "")]


def test_clip_durations_from_a_sidecar_or_unknown(tmp_path):
    clips = tmp_path / "emolia-emo" / "data" / "x"
    clips.mkdir(parents=True)
    (clips / "A.mp3").write_bytes(b"")
    (clips / "A.json").write_text(json.dumps({"duration": 2.5}))
    (clips / "B.mp3").write_bytes(b"not audio")
    items = pd.DataFrame({"source_emotion": ["Awe"] * 3, "queried_emotion": ["Awe"] * 3, "task_type": ["affirmative"] * 3,
                          "file_name": ["A.mp3", "B.mp3", "C.mp3"]})
    got = clip_durations_ms(items, EMO, tmp_path)
    assert got[0] == 2500.0 and np.isnan(got[1]) and np.isnan(got[2])


# ---- end to end ------------------------------------------------------------------------------


def test_exclude_raters_reruns_without_them_and_records_it(tmp_path):
    ann = WORKED / "input" / "annotations"
    r = run_script("analysis.py", "--annotations-root", ann, "--output-root", tmp_path / "all")
    assert r.returncode == 0, r.stderr
    r = run_script("analysis.py", "--annotations-root", ann, "--output-root", tmp_path / "ex", "--exclude-raters", "user_3")
    assert r.returncode == 0, r.stderr
    raw = pd.read_csv(ann / "emolia-emo" / "annotations.csv")
    before = json.loads((tmp_path / "all/emolia-emo/summary.json").read_text())
    after = json.loads((tmp_path / "ex/emolia-emo/summary.json").read_text())
    assert after["raters"]["excluded"] == ["user_3"] and before["raters"]["excluded"] == []
    assert after["rows_raw"] == len(raw) - (raw["username"] == "user_3").sum()
    profiles = pd.read_csv(tmp_path / "ex/emolia-emo/raters.csv")
    assert "user_3" not in set(profiles["rater"]) and "user_3" in set(pd.read_csv(tmp_path / "all/emolia-emo/raters.csv")["rater"])
    assert "This run excluded: user_3" in (tmp_path / "ex/emolia-emo/report.md").read_text()
    r = run_script("analysis.py", "--annotations-root", ann, "--output-root", tmp_path / "bad", "--exclude-raters", "nobody")
    assert r.returncode == 2 and "--exclude-raters" in r.stderr and "nobody" in r.stderr
    assert not (tmp_path / "bad").exists()


def test_report_replaces_figures_on_too_few_items_with_a_sentence(tmp_path):
    shutil.copytree(WORKED / "input", tmp_path, dirs_exist_ok=True)
    assert run_script("analysis.py", cwd=tmp_path).returncode == 0
    s = json.loads((tmp_path / "analysis_outputs/emolia-dim/summary.json").read_text())
    fleiss = s["agreement_detail"]["figures"]["fleiss_binary_kappa"]
    assert fleiss["reliable"] is False and fleiss["value"] == s["agreement"]["fleiss_binary_kappa"]  # kept, marked
    report = (tmp_path / "analysis_outputs/emolia-dim/report.md").read_text()
    section = report[report.index("Agreement among the human raters"):report.index("Human upper bound")]
    assert f"- Fleiss' κ (binary): {fleiss['n_items']} items rated by 3 raters (complete): too few" in section
    assert f"{fleiss['value']:+.3f}" not in section
    combined = (tmp_path / "analysis_outputs/report.md").read_text()
    assert combined.index("## Agreement among the human raters") < combined.index("## Upstream's headline")


def test_excluding_one_of_three_raters_leaves_every_figure_of_the_remaining_pair(tmp_path):
    # The report found: "complete" meant exactly 3 raters, so excluding one of three removed every
    # κ, Fleiss and LOO figure ("too few items (0)"). In a two-rater panel complete now means
    # "rated by both"; expected figures of the pair left come from scikit-learn and statsmodels on the
    # raw demo votes (each rater's latest vote per item, present = weakly or strongly present).
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    ann = REPO / "annotations"
    r = run_script("analysis.py", "--annotations-root", ann, "--output-root", tmp_path / "ex", "--subsets", "emolia-emo",
                   "--exclude-raters", "user_2", "--no-figures")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "ex/emolia-emo/summary.json").read_text())
    raw = pd.read_csv(ann / "emolia-emo/annotations.csv")
    raw = raw[raw["username"] != "user_2"].sort_values("created_at", kind="stable")
    key = ["file_name", "queried_emotion", "task_type"]
    latest = raw.drop_duplicates([*key, "username"], keep="last")
    wide = latest.assign(present=latest["rating"].ne("not_present").astype(int)).pivot_table(
        index=key, columns="username", values="present").dropna().astype(int)
    assert s["complete_item_raters"] == 2 and s["items_complete"] == len(wide) > 250
    a = s["agreement"]
    assert a["pairwise_binary_kappa"]["user_0__user_1"] == pytest.approx(
        cohen_kappa_score(wide["user_0"], wide["user_1"]), abs=1e-12)
    assert a["fleiss_binary_kappa"] == pytest.approx(fleiss_kappa(aggregate_raters(wide.to_numpy())[0]), abs=1e-12)
    assert a["exact_3way_binary"] == pytest.approx((wide["user_0"] == wide["user_1"]).mean(), abs=1e-12)
    # leave-one-out with two raters: each vote against the other's, on every co-rated item
    assert a["human_loo_n_annotations"] == 2 * len(wide)
    assert a["human_loo_accuracy"] == pytest.approx((wide["user_0"] == wide["user_1"]).mean(), abs=1e-12)
    detail = s["agreement_detail"]["figures"]
    assert detail["fleiss_binary_kappa"]["reliable"] and detail["human_loo_accuracy"]["reliable"]
    report = (tmp_path / "ex/emolia-emo/report.md").read_text()
    assert "rated by 2 raters (complete)" in report and "from 2 annotators" in report
