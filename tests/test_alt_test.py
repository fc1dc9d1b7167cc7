"""The alternative annotator test (emolia_bench/alt_test.py) against a re-implementation written
from the paper's definitions with plain Python loops and scipy's t distribution, and on panels
where the answer is known."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from emolia_bench.alt_test import alt_test, alt_test_with_control


def panel(votes: dict) -> pd.DataFrame:
    """{item: {rater: vote}} -> the long frame alt_test reads (rater codes = rater numbers)."""
    return pd.DataFrame([(i, r, v) for i, rv in votes.items() for r, v in rv.items()], columns=["item", "rater", "binary"])


def reference(votes: dict, decision: list, epsilon: float, alpha: float = 0.05):
    """Per rater (items with >= 2 other raters, >= 30 of them): (rho_model, rho_rater, p); then
    Benjamini-Yekutieli q-values written out, the winning rate and rho."""
    raters = sorted({r for rv in votes.values() for r in rv})
    rows = {}
    for j in raters:
        w_model, w_rater = [], []
        for i, rv in votes.items():
            if j not in rv or len(rv) < 3:
                continue
            others = [v for r, v in rv.items() if r != j]
            s_rater = sum(v == rv[j] for v in others) / len(others)
            s_model = sum(v == decision[i] for v in others) / len(others)
            w_model.append(1 if s_model >= s_rater else 0)
            w_rater.append(1 if s_rater >= s_model else 0)
        if len(w_model) < 30:
            continue
        d = [a - b for a, b in zip(w_rater, w_model, strict=True)]
        n, mean = len(d), sum(d) / len(d)
        sd = (sum((x - mean) ** 2 for x in d) / (n - 1)) ** 0.5
        p = (0.0 if mean < epsilon else 1.0) if sd == 0 else float(stats.t.cdf((mean - epsilon) / (sd / n ** 0.5), n - 1))
        rows[j] = (sum(w_model) / n, sum(w_rater) / n, p)
    m = len(rows)
    c = sum(1 / k for k in range(1, m + 1))
    order = sorted(rows, key=lambda j: rows[j][2])
    q, running = {}, 1.0
    for rank in range(m, 0, -1):  # q_(k) = min over l >= k of p_(l) * m * c(m) / l, capped at 1
        j = order[rank - 1]
        running = min(running, rows[j][2] * m * c / rank)
        q[j] = min(running, 1.0)
    wins = sum(q[j] <= alpha for j in rows)
    return rows, q, wins / m if m else None, float(np.mean([rows[j][0] for j in rows])) if m else None


def random_panel(seed: int, n_items: int, n_raters: int, accuracy: float):
    """Items with a hidden truth; every rater rates every item, right with probability ``accuracy``."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    votes = {i: {r: int(truth[i] if rng.random() < accuracy else 1 - truth[i]) for r in range(n_raters)}
             for i in range(n_items)}
    return truth, votes


@pytest.mark.parametrize("seed, epsilon", [(1, 0.1), (2, 0.0), (3, 0.2)])
def test_alt_test_equals_the_definition_written_out(seed, epsilon):
    rng = np.random.default_rng(seed)
    _, votes = random_panel(seed, 60, 4, 0.7)
    for i in range(0, 60, 7):  # some items with fewer raters: 2 (not used) and 3 (used)
        del votes[i][int(rng.integers(0, 4))]
    for i in range(0, 60, 11):
        votes[i] = dict(list(votes[i].items())[:2])
    decision = rng.integers(0, 2, 60)
    got = alt_test(panel(votes), decision, ["a", "b", "c", "d"], epsilon=epsilon)
    rows, q, omega, rho = reference(votes, list(decision), epsilon)
    assert len(got["per_rater"]) == 4 and got["n_raters_tested"] == len(rows) == 4
    for r in got["per_rater"]:
        j = "abcd".index(r["rater"])
        assert (r["rho_model"], r["rho_rater"]) == pytest.approx(rows[j][:2], abs=1e-12)
        assert r["p"] == pytest.approx(rows[j][2], abs=1e-12) and r["q_by"] == pytest.approx(q[j], abs=1e-12)
    assert got["winning_rate"] == pytest.approx(omega, abs=1e-12) and got["rho"] == pytest.approx(rho, abs=1e-12)
    # raters as a sample: Clopper-Pearson from the beta distribution's quantiles
    k, n = round(omega * 4), 4
    lo = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
    assert got["winning_rate_raters_as_sampled_ci95"] == pytest.approx([lo, hi], abs=1e-9)


def test_the_majority_of_the_raters_may_replace_one_and_a_coin_may_not():
    truth, votes = random_panel(7, 300, 5, 0.8)
    frame = panel(votes)
    majority = np.array([int(sum(rv.values()) >= 3) for rv in votes.values()])
    names = list("abcde")
    wins = alt_test_with_control(frame, majority, names, seed=1, epsilon=0.1)
    assert wins["winning_rate"] == 1.0 and wins["verdict"] == "may replace a rater at ε = 0.1"
    coin = np.random.default_rng(3).integers(0, 2, 300)
    loses = alt_test_with_control(frame, coin, names, seed=1, epsilon=0.1)
    assert loses["winning_rate"] == 0.0 and loses["verdict"].startswith("may not replace")
    # a copy of rater a's votes ties with a on every item: both advantage probabilities are 1
    copy = np.array([rv[0] for rv in votes.values()])
    a = alt_test(frame, copy, names, epsilon=0.1)["per_rater"][0]
    assert (a["rho_model"], a["rho_rater"], a["model_beats_rater"]) == (1.0, 1.0, True)


def test_too_few_raters_or_items_is_said_with_the_counts():
    _, votes = random_panel(5, 20, 3, 0.8)  # 20 items per rater: below the 30 the t-test needs
    got = alt_test(panel(votes), np.zeros(20, int), ["a", "b", "c"])
    assert got["verdict"] == "too few" and got["winning_rate"] is None
    assert "a: 20, b: 20, c: 20" in got["why"]


def test_the_benchmark_reports_the_test_and_says_too_few_where_it_cannot_run(demo_scored, tmp_path):
    from .conftest import run_script

    for subset, slice_keys in (("emolia-emo", {"by_task_type", "by_queried_emotion"}),
                               ("emolia-dim", {"by_polarity", "by_dimension"})):
        block = json.loads((demo_scored / "sham" / subset / "summary.json").read_text())["alt_test"]
        assert {"model", "sampling_prior", *slice_keys} <= set(block)
        assert not block["model"]["verdict"].startswith("may replace")  # the sham scorer (a hash) does not pass
    # 40 clips of the demo's dim items: no rater has 30 items rated with two others
    r = run_script("benchmark.py", "--analysis-root", demo_scored / "an", "--output-dir", tmp_path, "--subset",
                   "emolia-dim", "--limit", "40", "--no-figures")
    assert r.returncode == 0, r.stderr
    dim = json.loads((tmp_path / "emolia-dim/summary.json").read_text())["alt_test"]["model"]
    assert dim["verdict"] == "too few" and "the test needs 3" in dim["why"]
    assert dim["why"] in (tmp_path / "emolia-dim/report.md").read_text()


def test_the_ordinal_variant_equals_the_rank_rmse_definition_written_out():
    # ratings 0/1/2 by 4 raters and a model's similarity: every answer as a percentile rank within
    # its rater (ties share the mean rank), the model's over all items; alignment = -RMSE against
    # the other raters' ranks, written with loops
    rng = np.random.default_rng(8)
    n, m, epsilon = 50, 4, 0.1
    ratings = {i: {r: int(rng.integers(0, 3)) for r in range(m) if rng.random() < 0.9} for i in range(n)}
    sims = rng.normal(size=n)
    rank_of = {}
    for r in range(m):
        mine = {i: rv[r] for i, rv in ratings.items() if r in rv}
        values = sorted(mine.values())
        for i, v in mine.items():  # mean position of the ties, over the count
            first, last = values.index(v) + 1, len(values) - values[::-1].index(v)
            rank_of[(i, r)] = (first + last) / 2 / len(values)
    order = sorted(range(n), key=lambda i: sims[i])
    model_rank = {i: (order.index(i) + 1) / n for i in range(n)}
    rows = {}
    for j in range(m):
        wm, wr = [], []
        for i, rv in ratings.items():
            if j not in rv or len(rv) < 3:
                continue
            others = [rank_of[(i, k)] for k in rv if k != j]
            s_j = -(sum((rank_of[(i, j)] - o) ** 2 for o in others) / len(others)) ** 0.5
            s_m = -(sum((model_rank[i] - o) ** 2 for o in others) / len(others)) ** 0.5
            wm.append(1 if s_m >= s_j - 1e-12 else 0)
            wr.append(1 if s_j >= s_m - 1e-12 else 0)
        d = np.array(wr) - np.array(wm)
        rows[j] = (np.mean(wm), np.mean(wr), float(stats.ttest_1samp(d, epsilon, alternative="less").pvalue))
    frame = panel({i: rv for i, rv in ratings.items()}).rename(columns={"binary": "value"})
    frame["binary"] = (frame["value"] > 0).astype(int)
    frame["rank"] = [rank_of[(i, r)] for i, r in zip(frame["item"], frame["rater"], strict=True)]
    got = alt_test(frame, np.array([model_rank[i] for i in range(n)]), list("abcd"), epsilon=epsilon, alignment="rank")
    for r in got["per_rater"]:
        j = "abcd".index(r["rater"])
        assert (r["rho_model"], r["rho_rater"], r["p"]) == pytest.approx(rows[j], abs=1e-9)
