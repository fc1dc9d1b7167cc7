"""Every agreement figure on one hand-worked fixture.

Three raters a, b, c (codes 0, 1, 2); binary votes:

    item  a  b  c
    i1    1  1  1
    i2    1  0  1
    i3    0  0  0
    i4    0  1  1
    i5    1  0  .     (two raters)
    i6    .  .  1     (one rater)

Complete items (exactly 3 raters) are i1–i4. The expected values are derived in the comments.
"""

import numpy as np
import pandas as pd
import pytest

from emolia_bench import agreement as ag
from emolia_bench.resampling import Bootstrap

VOTES = {  # item -> {rater: vote}
    0: {0: 1, 1: 1, 2: 1},
    1: {0: 1, 1: 0, 2: 1},
    2: {0: 0, 1: 0, 2: 0},
    3: {0: 0, 1: 1, 2: 1},
    4: {0: 1, 1: 0},
    5: {2: 1},
}
RATERS = ["a", "b", "c"]


def votes_frame(votes=VOTES) -> pd.DataFrame:
    rows = [(i, r, v) for i, rv in votes.items() for r, v in rv.items()]
    df = pd.DataFrame(rows, columns=["item", "rater", "binary"])
    df["value"] = df["binary"]
    return df


def alone(figure, seed, draws=1000):
    """The interval of a figure's first statistic, bootstrapped on its own."""
    return ag.intervals([figure], Bootstrap(draws=draws, seed=seed))[figure.names[0]]


@pytest.fixture
def votes():
    return votes_frame()


def test_exact_3way(votes):
    # all-equal complete items: i1, i3 -> 2/4
    assert ag.exact_agreement(ag.complete_matrix(votes, "binary", 3)) == 0.5


def test_pairwise_exact_on_complete_items(votes):
    # a-b: i1 = , i2 ≠, i3 =, i4 ≠ -> 1/2; a-c: 3/4; b-c: 3/4 -> mean 2/3
    pairs = ag.co_rated_pairs(votes)
    complete = pairs[pairs["item"] < 4]
    assert ag.pairwise_exact(complete, "binary") == pytest.approx(2 / 3)


def test_cohen_kappa_per_pair(votes):
    # a-b: a=[1,1,0,0], b=[1,0,0,1]: p_o=.5, p_e=.5*.5+.5*.5=.5 -> κ=0
    # a-c: c=[1,1,0,1]: p_o=.75, p_e=.5*.75+.5*.25=.5 -> κ=.5 ; b-c likewise .5 -> mean 1/3
    pairs = ag.co_rated_pairs(votes)
    k = ag.pairwise_kappa(pairs[pairs["item"] < 4], "binary", RATERS)
    assert k["a__b"] == pytest.approx(0.0) and k["a__c"] == pytest.approx(0.5) and k["b__c"] == pytest.approx(0.5)
    assert k["mean"] == pytest.approx(1 / 3)


def test_cohen_kappa_undefined_cases():
    # raters x, y share one item, both say 0 -> p_e = 1 -> null; z shares nothing with x -> null
    v = votes_frame({0: {0: 0, 1: 0}, 1: {2: 1}})
    k = ag.pairwise_kappa(ag.co_rated_pairs(v), "binary", ["x", "y", "z"])
    assert k == {"x__y": None, "x__z": None, "y__z": None, "mean": None}


def test_fleiss(votes):
    # counts (0s, 1s): i1 (0,3), i2 (1,2), i3 (3,0), i4 (1,2); P_i = (Σn²-3)/6 = 1, 1/3, 1, 1/3 -> P̄ = 2/3
    # p = 5/12, 7/12 -> P_e = 74/144 = 37/72 -> κ = (2/3 - 37/72)/(35/72) = 11/35
    assert ag.fleiss(ag.complete_matrix(votes, "binary", 3)) == pytest.approx(11 / 35)


def test_fleiss_degenerate_and_empty():
    all_same = np.zeros((4, 3), dtype=int)  # p_e = 1
    assert ag.fleiss(all_same) is None
    assert ag.fleiss(np.empty((0, 3))) is None


def test_pairwise_accuracy_over_all_items(votes):
    # a-b co-rate i1..i5: equal on i1, i3 -> 2/5; a-c 3/4; b-c 3/4 -> mean (0.4+0.75+0.75)/3
    # balanced, both directions per pair:
    #   a truth/b pred: recall 1/3, specificity 1/2 -> 5/12; b truth/a pred: 1/2, 1/3 -> 5/12
    #   a-c: 3/4 and 5/6; b-c: 3/4 and 5/6 -> mean of six = 4/6
    acc, bal = ag.pairwise_accuracy(ag.co_rated_pairs(votes))
    assert acc == pytest.approx(1.9 / 3)
    assert bal == pytest.approx(4 / 6)


def test_loo(votes):
    # i1: 3 comparisons vs majority 1, all right; i2 [1,0,1]: only b compares (others 1,1) -> wrong;
    # i3: 3 right (truth 0); i4 [0,1,1]: only a compares (others 1,1) -> wrong. 8 comparisons, 6 right.
    # balanced: truth 1 -> 3 of 5 right; truth 0 -> 3 of 3 -> (0.6 + 1)/2 = 0.8
    acc, bal, n = ag.loo_agreement(votes)
    assert (acc, n) == (0.75, 8.0)
    assert bal == pytest.approx(0.8)


def test_loo_none_without_three_vote_items():
    # three raters present, no item with three votes
    assert ag.loo_agreement(votes_frame({0: {0: 1, 1: 0}, 1: {2: 1}})) == (None, None, 0.0)


def test_loo_in_a_two_rater_panel_compares_each_vote_with_the_other():
    # i0: 1 vs 0 -> both comparisons wrong; i1: 1 vs 1 -> both right. 4 comparisons, 2 right;
    # truth 1 (three comparisons: i0's second, i1's two) has 2 right, truth 0 (one) has 0 -> (2/3 + 0)/2
    acc, bal, n = ag.loo_agreement(votes_frame({0: {0: 1, 1: 0}, 1: {0: 1, 1: 1}}))
    assert (acc, n) == (0.5, 4.0) and bal == pytest.approx(1 / 3)


def test_krippendorff_alpha_binary(votes):
    # coincidences over i1..i5: o00=3, o11=5, o01=o10=3, n=14, n0=6, n1=8
    # α = 1 - (n-1)·(o01+o10)/(2·n0·n1) = 1 - 13·6/96 = 0.1875
    assert ag.krippendorff_alpha(votes, "binary", 2, "nominal") == pytest.approx(0.1875)


def test_krippendorff_degenerate():
    v = votes_frame({0: {0: 1, 1: 1}, 1: {0: 1, 1: 1}})
    assert ag.krippendorff_alpha(v, "binary", 2, "nominal") is None  # no variation at all
    assert ag.krippendorff_alpha(votes_frame({0: {0: 1}}), "binary", 2, "nominal") is None  # no item with 2 raters


def test_augmented_panel(votes):
    # sampling prior votes g: i1=1, i2=0, i3=0, i4=1, i5=1 (i6 has one human: not eligible)
    items = pd.DataFrame({
        "n_raters": [3, 3, 3, 3, 2, 1],
        "intended": [1, 0, 0, 1, 1, 0],
        "majority_present": [1, 1, 0, 1, 0, 1],
        "majority_present_tie": [False, False, False, False, True, False],
    })
    out = ag.augmented_agreement(votes, items)
    assert out["preselection_n_eligible_items"] == 5
    # pairs: a-b .4, a-c .75, b-c .75, a-g 3/5, b-g 4/5, c-g 3/4 -> mean 4.05/6
    assert out["preselection_pairwise_accuracy"] == pytest.approx(4.05 / 6)
    # LOO on i1..i5 with g: 17 comparisons, 11 right; truth 1: 7/11, truth 0: 4/6
    assert out["preselection_loo_accuracy"] == pytest.approx(11 / 17)
    assert out["preselection_loo_balanced_accuracy"] == pytest.approx((7 / 11 + 4 / 6) / 2)
    assert out["preselection_loo_n_annotations"] == 17.0
    # full coverage (a, b, c, g all filled): i1..i4; counts (0,4) (2,2) (4,0) (1,3), n=4
    # P_i = 1, 1/3, 1, 1/2 -> P̄ = 17/24; p = 7/16, 9/16 -> P_e = 130/256 -> κ = 77/189
    assert out["preselection_n_full_coverage_items"] == 4
    assert out["preselection_fleiss_kappa"] == pytest.approx(77 / 189)
    # prior vs human majority, i5 tied -> skipped: i1 ✓ i2 ✗ i3 ✓ i4 ✓ -> 3/4; BA (2/3 + 1)/2
    assert out["gemini_vs_human_consensus_n_items"] == 4.0
    assert out["gemini_vs_human_consensus_accuracy"] == 0.75
    assert out["gemini_vs_human_consensus_balanced_accuracy"] == pytest.approx(5 / 6)


def test_bootstrap_intervals_bracket_the_estimate(votes):
    pairs = ag.co_rated_pairs(votes)
    ci = alone(ag.pairwise_accuracy_resampled(pairs), seed=1)
    assert ci[0] <= 1.9 / 3 <= ci[1] and 0 <= ci[0] < ci[1] <= 1
    loo = alone(ag.loo_accuracy_resampled(votes), seed=1)
    assert loo[0] <= 0.75 <= loo[1]


def test_figures_over_the_same_items_see_the_same_resamples():
    # Every item fully rated: the co-rated items and the items with a LOO comparison are the
    # same 30 units, so both intervals are read off one stream (n, draws, seed); checked by
    # recomputing each resample's two statistics by hand from explicitly drawn items.
    full = votes_frame({i: {0: i % 2, 1: (i // 2) % 2, 2: 1} for i in range(30)})
    pairs = ag.co_rated_pairs(full)
    got = ag.intervals([ag.pairwise_accuracy_resampled(pairs), ag.loo_accuracy_resampled(full)],
                       Bootstrap(draws=300, seed=4))
    idx = np.random.default_rng(4).integers(0, 30, size=(300, 30), dtype=np.int32)
    times = np.stack([np.bincount(row, minlength=30) for row in idx])
    agree = {}  # per item: agreements of each pair (a-b, a-c, b-c)
    for i in range(30):
        x, y, z = i % 2, (i // 2) % 2, 1
        agree[i] = (x == y, x == z, y == z)
    pair_acc = [np.mean([sum(times[d, i] * agree[i][p] for i in range(30)) / times[d].sum() for p in range(3)])
                for d in range(300)]
    # LOO: each vote against the majority of the other two (skipped when they tie)
    correct, total = np.zeros(300), np.zeros(300)
    for i in range(30):
        v = [i % 2, (i // 2) % 2, 1]
        for k in range(3):
            others = [v[j] for j in range(3) if j != k]
            if others[0] == others[1]:
                correct += times[:, i] * (v[k] == others[0])
                total += times[:, i]
    from emolia_bench.resampling import percentile_interval

    assert got["human_pairwise_accuracy"] == pytest.approx(percentile_interval(np.array(pair_acc)), abs=1e-12)
    assert got["human_loo_accuracy"] == pytest.approx(percentile_interval(correct / total), abs=1e-12)


def test_bootstrap_constant_data_gives_a_point_interval():
    v = votes_frame({i: {0: 1, 1: 1, 2: 1} for i in range(20)})
    assert alone(ag.pairwise_accuracy_resampled(ag.co_rated_pairs(v)), seed=0) == (1.0, 1.0)


def test_pairwise_figures_equal_scikit_learn_on_random_panels():
    """The per-pair tables must give exactly what scikit-learn computes pair by pair."""
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

    rng = np.random.default_rng(7)
    rows = [(i, r, int(rng.integers(0, 3))) for i in range(300) for r in rng.choice(5, size=rng.integers(1, 5), replace=False)]
    v = pd.DataFrame(rows, columns=["item", "rater", "value"])
    v["binary"] = (v["value"] >= 1).astype(int)
    pairs = ag.co_rated_pairs(v, ("binary", "value"))
    accs, bals = [], []
    kappas = {}
    for (a, b), g in pairs.groupby(["a", "b"]):
        x, y = g["binary_a"].to_numpy(), g["binary_b"].to_numpy()
        accs.append(np.mean(x == y))
        bals += [balanced_accuracy_score(t, p) for t, p in ((x, y), (y, x)) if t.min() != t.max()]
        kappas[f"r{a}__r{b}"] = cohen_kappa_score(g["value_a"], g["value_b"])
    acc, bal = ag.pairwise_accuracy(pairs)
    assert acc == pytest.approx(np.mean(accs), abs=1e-12) and bal == pytest.approx(np.mean(bals), abs=1e-12)
    ours = ag.pairwise_kappa(pairs, "value", [f"r{i}" for i in range(5)], n_values=3)
    for k, want in kappas.items():
        assert ours[k] == pytest.approx(want, abs=1e-12)


def test_loo_balanced_accuracy_is_undefined_on_a_one_class_truth():
    # upstream writes NaN when every leave-one-out target is the same class; so do we (null):
    # i0 [1,1,1] and i1 [1,1,0]: every target is 1 (3 + 2 comparisons; i1's "0" vote is compared
    # with the others' majority 1, its "1" votes with a 1-0 tie: skipped)
    acc, bal, n = ag.loo_agreement(votes_frame({0: {0: 1, 1: 1, 2: 1}, 1: {0: 1, 1: 1, 2: 0}}))
    assert (acc, bal, n) == (0.75, None, 4.0)
