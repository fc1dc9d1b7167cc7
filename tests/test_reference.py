"""The vectorised analysis against a literal, loop-by-loop reading of the rules in README “2. analysis.py” and agreement.py's docstring.

`reference_agreement` below is written straight from those sentences with plain Python
dicts and loops — no pandas, no statsmodels, no shared helpers — so it is an independent
derivation: Cohen's κ from p_o and the raters' marginals, Fleiss' κ from its textbook formula,
leave-one-out by counting the other votes. The fast code must agree with it to 1e-9 on random
sparse panels (1–5 raters per item, re-ratings, equal timestamps, panels of up to 7 raters) and
on the real exports in ../shared/real (skipped when absent).
"""

from __future__ import annotations

import random
from itertools import combinations

import pandas as pd
import pytest

from emolia_bench.analysis import analyze_subset
from emolia_bench.io import load_annotations, load_flags, load_users
from emolia_bench.resampling import Bootstrap
from emolia_bench.subsets import DIM, EMO

from .conftest import REAL, needs


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _bal(pairs):
    """Mean of recall on truth=1 and truth=0 over (truth, pred) pairs; None unless both occur."""
    recalls = []
    for c in (1, 0):
        sel = [p for t, p in pairs if t == c]
        if not sel:
            return None
        recalls.append(sum(1 for p in sel if p == c) / len(sel))
    return sum(recalls) / 2


def _cohen(a, b, labels):
    n = len(a)
    if n == 0:
        return None
    p_o = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    p_e = sum((a.count(k) / n) * (b.count(k) / n) for k in labels)
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def _fleiss(rows, labels):
    """rows: list of equal-length vote lists."""
    if not rows:
        return None
    n = len(rows[0])
    N = len(rows)
    P_bar = sum((sum(r.count(k) ** 2 for k in labels) - n) / (n * (n - 1)) for r in rows) / N
    p = [sum(r.count(k) for r in rows) / (N * n) for k in labels]
    P_e = sum(x * x for x in p)
    return None if abs(1 - P_e) < 1e-15 else (P_bar - P_e) / (1 - P_e)


def _complete_size(votes: dict) -> int:
    # README: a complete item has 3 raters, or both raters of a panel of two
    raters = {r for rv in votes.values() for r in rv}
    return 3 if len(raters) >= 3 else 2 if len(raters) == 2 else 0


def _loo(votes: dict):
    comps = []
    least = max(2, _complete_size(votes))  # as many votes as a complete item
    for rv in votes.values():
        vs = list(rv.values())
        if len(vs) < least:
            continue
        for i, v in enumerate(vs):
            others = vs[:i] + vs[i + 1:]
            ones = sum(others)
            zeros = len(others) - ones
            if ones == zeros:
                continue
            comps.append((1 if ones > zeros else 0, v))
    acc = sum(1 for t, p in comps if t == p) / len(comps) if comps else None
    return acc, _bal(comps), float(len(comps))


def _pairwise(votes: dict, raters):
    accs, bals = [], []
    for a, b in combinations(raters, 2):
        co = [(rv[a], rv[b]) for rv in votes.values() if a in rv and b in rv]
        if not co:
            continue
        accs.append(sum(1 for x, y in co if x == y) / len(co))
        for truth_first in (True, False):
            pairs = co if truth_first else [(y, x) for x, y in co]
            if {t for t, _ in pairs} == {0, 1}:
                bals.append(_bal(pairs))
    return _mean(accs), _mean(bals)


def reference_agreement(rows, present_from: int, n_levels: int, prior: dict):
    """rows: (item, rater, value, created_at) in file order; prior: item -> 0/1."""
    latest = {}
    for item, rater, value, created in rows:  # later row wins on equal timestamps
        if (item, rater) not in latest or created >= latest[(item, rater)][1]:
            latest[(item, rater)] = (value, created)
    ordinal, binary = {}, {}
    for (item, rater), (value, _) in latest.items():
        ordinal.setdefault(item, {})[rater] = value
        binary.setdefault(item, {})[rater] = 1 if value >= present_from else 0
    raters = sorted({r for rv in ordinal.values() for r in rv})
    out = {}
    for name, votes, labels in (("binary", binary, [0, 1]), ("ordinal", ordinal, list(range(n_levels)))):
        complete = {i: rv for i, rv in votes.items() if len(rv) == _complete_size(votes)}
        out[f"exact_3way_{name}"] = (sum(1 for rv in complete.values() if len(set(rv.values())) == 1) / len(complete)
                                     if complete else None)
        exact, kappas = [], {}
        for a, b in combinations(raters, 2):
            co = [(rv[a], rv[b]) for rv in complete.values() if a in rv and b in rv]
            if co:
                exact.append(sum(1 for x, y in co if x == y) / len(co))
            kappas[f"{a}__{b}"] = _cohen([x for x, _ in co], [y for _, y in co], labels)
        kappas["mean"] = _mean(kappas.values())
        out[f"pairwise_exact_{name}"] = _mean(exact)
        out[f"pairwise_{name}_kappa"] = kappas
        out[f"fleiss_{name}_kappa"] = _fleiss([list(rv.values()) for rv in complete.values()], labels)
    out["human_pairwise_accuracy"], out["human_pairwise_balanced_accuracy"] = _pairwise(binary, raters)
    (out["human_loo_accuracy"], out["human_loo_balanced_accuracy"], out["human_loo_n_annotations"]) = _loo(binary)

    # the sampling-prior rater on items with >= 2 human raters
    eligible = {i: dict(rv) for i, rv in binary.items() if len(rv) >= 2}
    for rv_item, rv in eligible.items():
        rv["~prior"] = prior[rv_item]
    aug_raters = sorted({r for rv in eligible.values() for r in rv})
    aug = {"preselection_n_eligible_items": len(eligible)}
    aug["preselection_pairwise_accuracy"], aug["preselection_pairwise_balanced_accuracy"] = _pairwise(eligible, aug_raters)
    (aug["preselection_loo_accuracy"], aug["preselection_loo_balanced_accuracy"],
     aug["preselection_loo_n_annotations"]) = _loo(eligible)
    full = [[rv[r] for r in aug_raters] for rv in eligible.values() if len(rv) == len(aug_raters)]
    aug["preselection_fleiss_kappa"] = _fleiss(full, [0, 1])
    aug["preselection_n_full_coverage_items"] = len(full)
    decided = []
    for i in eligible:
        ones = sum(binary[i].values())
        zeros = len(binary[i]) - ones
        if ones != zeros:
            decided.append((1 if ones > zeros else 0, prior[i]))
    aug["gemini_vs_human_consensus_accuracy"] = (sum(1 for t, p in decided if t == p) / len(decided)
                                                 if decided else None)
    aug["gemini_vs_human_consensus_balanced_accuracy"] = _bal(decided)
    aug["gemini_vs_human_consensus_n_items"] = float(len(decided))
    return out, aug


def assert_close(got, want, path=""):
    if isinstance(want, dict):
        for k, v in want.items():
            assert k in got, f"{path}/{k} missing"
            assert_close(got[k], v, f"{path}/{k}")
    elif want is None:
        assert got is None, f"{path}: {got} != None"
    else:
        assert got is not None and abs(got - want) <= 1e-9, f"{path}: {got} != {want}"


def _check(subset, ann: pd.DataFrame, users: pd.DataFrame, flags=None):
    result = analyze_subset(subset, ann, users, flags, bootstrap=Bootstrap(draws=1000, seed=1))
    value = {label: i for i, label in enumerate(subset.scale)}
    keys = list(subset.item_key)
    rows = [(tuple(r[k] for k in keys), r["username"], value[r["rating"]], r["created_at"])
            for r in ann.to_dict(orient="records")]
    prior = {tuple(r[k] for k in keys): int(r[subset.prior_column] in subset.prior_positive)
             for r in ann.to_dict(orient="records")}
    want, want_aug = reference_agreement(rows, subset.present_from, len(subset.scale), prior)
    if not subset.ordinal:
        want = {k: v for k, v in want.items() if "ordinal" not in k}
    assert_close(result.summary["agreement"], want, "agreement")
    assert_close(result.summary["augmented_agreement"], want_aug, "augmented_agreement")


def as_export(rows: list[dict]) -> pd.DataFrame:
    """Vote rows -> an annotations.csv frame (ids and times filled in)."""
    df = pd.DataFrame(rows)
    df["annotation_id"] = [f"id{i}" for i in range(len(df))]
    df["reaction_time_ms"] = "1000"
    df["sample_time_ms"] = "2000"
    return df


def random_dim_export(seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    n_raters = rng.randint(2, 7)
    rows = []
    for item in range(rng.randint(5, 60)):
        level = rng.choice(["0", "3", "6", "European"])
        polarity = rng.choice(["positive", "negative"])
        p_yes = 0.7 if polarity == "positive" else 0.3
        for rater in rng.sample(range(n_raters), rng.randint(1, min(5, n_raters))):
            for _ in range(1 + (rng.random() < 0.15)):  # some re-ratings, some at the same second
                rows.append({"username": f"user_{rater}", "dimension": "TEMP",
                             "level": level, "polarity": polarity, "file_name": f"sample_{item:02d}.mp3",
                             "rating": "yes" if rng.random() < p_yes else "no",
                             "created_at": f"2026-04-01 10:{rng.randint(0, 2):02d}:00"})
    return as_export(rows)


def random_emo_export(seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    n_raters = rng.randint(3, 6)
    tasks = ["affirmative", "contrastive_1", "contrastive_2", "penultimate", "ultimate"]
    rows = []
    for item in range(rng.randint(5, 60)):
        task = rng.choice(tasks)
        weights = [0.2, 0.3, 0.5] if task == "affirmative" else [0.6, 0.25, 0.15]
        for rater in rng.sample(range(n_raters), min(rng.choice([1, 2, 3, 3, 3, 4, 5]), n_raters)):
            for _ in range(1 + (rng.random() < 0.1)):
                rows.append({"username": f"user_{rater}", "source_emotion": "Awe", "queried_emotion": "Awe",
                             "task_type": task, "file_name": f"F{item:03d}.mp3",
                             "rating": rng.choices(EMO.scale, weights)[0],
                             "created_at": f"2026-04-01 10:{rng.randint(0, 2):02d}:00"})
    return as_export(rows)


def users_of(ann):
    names = sorted(ann["username"].unique())
    return pd.DataFrame({"username": names})


@pytest.mark.parametrize("seed", range(12))
def test_dim_agreement_equals_the_literal_reading(seed):
    ann = random_dim_export(seed)
    _check(DIM, ann, users_of(ann))


@pytest.mark.parametrize("seed", range(12))
def test_emo_agreement_equals_the_literal_reading(seed):
    ann = random_emo_export(seed)
    _check(EMO, ann, users_of(ann))


@needs(REAL)
@pytest.mark.parametrize("subset", [EMO, DIM], ids=lambda s: s.name)
def test_real_exports_agreement_equals_the_literal_reading(subset):
    folder = REAL / subset.name / "annotations" / subset.name
    ann = load_annotations(folder / "annotations.csv", subset)
    _check(subset, ann, load_users(folder / "users.csv"),
           load_flags(folder / "flags.csv", subset) if subset.has_flags else None)
