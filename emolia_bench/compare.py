"""Compare benchmark runs: a leaderboard with intervals and paired significance tests.

For two runs A and B on the same rows:

* paired bootstrap of the difference in balanced accuracy, BA(B) − BA(A): clips are resampled
  (all rows of a clip together) and both runs are scored on the same resample; the 95 %
  percentile interval, and the two-sided p-value 2·min(P(Δ* ≤ 0), P(Δ* ≥ 0)) capped at 1
  (identical runs give Δ = 0 and p = 1);
* a clip-level sign-flip permutation test of that difference: with the truth fixed, BA(B) − BA(A)
  = Σ_c d_c, a sum over clips of d_c = ((tp_B − tp_A)_c / P + (tn_B − tn_A)_c / N) / 2 (P, N the
  positive and negative rows). If the two runs are exchangeable within each clip (no true
  difference), swapping A and B on any set of clips is as likely as the observed labelling: it
  flips the signs of those d_c. p = (1 + #{|Σ ε_c d_c| ≥ |Δ|}) / (1 + draws) over random signs
  ε. Rows of one clip move together, so it does not count correlated rows as independent
  evidence, as McNemar's row-level test did (simulated under no difference with clustered
  clips, McNemar rejected 20 % of the time at a nominal 5 %; this test stays at 5 %: tests);
* b = rows A got right and B wrong, c = the reverse (descriptive counts);
* the same paired clip bootstrap (interval and p) for the differences in the two headlines no
  threshold was tuned for: the macro AUROC (mean of the AUROC within each category, as
  benchmark.py reports it) and the balanced accuracy of cross-validated per-prompt thresholds
  (each run's own folds, seed, prompts and fallback threshold; the cross-validation re-run on
  every resample, :mod:`thresholds`). Both runs are scored on the same clip resamples.

Only rows scored ok by both runs enter a pair's tests. A run that calls one class on at least
:data:`ONE_CLASS_SHARE` of its rows is flagged in the leaderboard: its fixed-threshold figures
say nothing about the model (balanced accuracy 0.500 whatever its scores). The leaderboard ranks
runs by macro AUROC, then cross-validated balanced accuracy, then the fixed-threshold figure;
each run's rank by macro AUROC gets a 95 % interval over clip resamples shared by all runs, and
the benchmark's separability is the share of run pairs whose paired interval excludes 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError
from .io import check_values, first_bad, load_json_object, one_row_per_item, read_csv_strings
from .metrics import balanced_accuracy_from_sums, binary_metrics, confusion_counts
from .ranking import auroc_draws
from .resampling import Bootstrap, percentile_interval
from .selection import clip_ids
from .subsets import SUBSETS, Subset
from .thresholds import clip_folds, cv_balanced_accuracy

ONE_CLASS_SHARE = 0.99


@dataclass
class Run:
    name: str
    folder: Path
    subset: Subset
    summary: dict
    predictions: pd.DataFrame  # key columns, majority_present, pred_present, ok, clip, similarity, prompt


def load_run(folder: Path, name: str, subset: Subset) -> Run | None:
    sub = Path(folder) / subset.name
    if not (sub / "predictions.csv").exists():
        return None
    summary = load_json_object(sub / "summary.json", "the summary.json benchmark.py wrote")
    if summary.get("subset") != subset.name:
        raise InputError(sub / "summary.json", f"is for subset {summary.get('subset')!r}, expected {subset.name}")
    for key in ("overall", "unanimous_subset"):
        if not isinstance(summary.get(key), dict):
            raise InputError(sub / "summary.json", f"key '{key}' is missing or not an object; expected the summary.json "
                                                   "benchmark.py wrote", column=key)
    path = sub / "predictions.csv"
    cols = [*subset.item_key, "majority_present", "audio_path", "prompt", "similarity", "pred_present", "ok"]
    df = read_csv_strings(path, cols, allow_no_rows=True)
    check_values(path, df, "majority_present", ("0", "1"))
    check_values(path, df, "ok", ("True", "False"))
    scored = df["ok"] == "True"
    bad = (scored & ~df["pred_present"].isin(("0", "1"))) | (~scored & (df["pred_present"] != ""))
    first_bad(path, df, "pred_present", bad, "0 or 1 on a row scored ok, empty on a row that is not")
    similarity = pd.to_numeric(df["similarity"].where(scored, "0"), errors="coerce")
    bad = scored & ~np.isfinite(similarity.to_numpy(dtype=np.float64))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(path, f"unexpected value {df['similarity'].iloc[i]!r}; expected a finite number on a row "
                               "scored ok", row=i + 1, column="similarity")
    one_row_per_item(path, df, subset, "as benchmark.py writes it")  # a row counted twice would weigh twice
    out = df[list(subset.item_key)].copy()
    out["majority_present"] = df["majority_present"].astype(int)
    out["ok"] = df["ok"] == "True"
    out["pred_present"] = pd.to_numeric(df["pred_present"].replace("", np.nan)).fillna(0).astype(int)
    out["clip"] = clip_ids(df["audio_path"], subset.sham_stem(df))
    out["similarity"] = similarity.where(scored, np.nan).to_numpy(dtype=np.float64)
    out["prompt"] = df["prompt"]
    return Run(name, Path(folder), subset, summary, out)


def check_comparable(runs: list[Run]) -> None:
    """Same subset, same filter, same rows — or an InputError naming what differs."""
    first = runs[0]
    key = list(first.subset.item_key)
    ref = set(map(tuple, first.predictions[key].to_numpy().tolist()))
    for r in runs[1:]:
        for field in ("filter_mode", "filter_stats"):
            if r.summary.get(field) != first.summary.get(field):
                raise InputError(r.folder / r.subset.name / "summary.json",
                                 f"{field} {r.summary.get(field)!r} differs from {first.name}'s "
                                 f"{first.summary.get(field)!r}; runs must use the same filter to be compared")
        rows = set(map(tuple, r.predictions[key].to_numpy().tolist()))
        if rows != ref:
            raise InputError(r.folder / r.subset.name / "predictions.csv",
                             f"row set differs from {first.name}'s ({len(rows - ref)} rows only here, "
                             f"{len(ref - rows)} only there); runs must score the same rows to be compared")
        both = first.predictions[[*key, "majority_present"]].merge(r.predictions[[*key, "majority_present"]], on=key)
        differs = both["majority_present_x"] != both["majority_present_y"]
        if differs.any():  # B scored against other labels: a comparison on A's labels would mislead
            at = both.loc[differs, key].iloc[0]
            raise InputError(r.folder / r.subset.name / "predictions.csv",
                             f"majority_present differs from {first.name}'s on {int(differs.sum())} rows (first: item "
                             f"{tuple(at)}); runs must be scored against the same labels (the same analysis run)",
                             column="majority_present")


def paired_rows(a: Run, b: Run) -> pd.DataFrame:
    """The rows both runs scored, A's columns and B's side by side (``_a`` / ``_b``), in item-key
    order: the rows' order in the files changes nothing."""
    key = list(a.subset.item_key)
    m = a.predictions.merge(b.predictions[[*key, "pred_present", "ok", "similarity", "prompt"]], on=key,
                            suffixes=("_a", "_b"))
    m = m.sort_values(key, kind="stable").reset_index(drop=True)
    return m[m["ok_a"] & m["ok_b"]]


def paired_test(a: Run, b: Run, *, bootstrap: Bootstrap) -> dict:
    m = paired_rows(a, b)
    t = m["majority_present"].to_numpy()
    pa, pb = m["pred_present_a"].to_numpy(), m["pred_present_b"].to_numpy()
    ba_a = binary_metrics(t, pa)["balanced_accuracy"]
    ba_b = binary_metrics(t, pb)["balanced_accuracy"]
    diff = None if ba_a is None or ba_b is None else ba_b - ba_a
    right_a, right_b = pa == t, pb == t
    n_ab = int((right_a & ~right_b).sum())  # A right, B wrong
    n_ba = int((~right_a & right_b).sum())  # B right, A wrong
    ci, p_boot, p_flip = None, None, None
    if diff is not None:
        clip = pd.factorize(m["clip"], sort=True)[0]
        p_flip = sign_flip_p_value(t, pa, pb, clip, draws=bootstrap.draws, seed=bootstrap.seed)
        t_a, t_b = confusion_counts(t, pa), confusion_counts(t, pb)  # [pos, tp, neg, tn] per row
        d = bootstrap.grouped(
            lambda s: (balanced_accuracy_from_sums(s[4], s[0], s[5], s[2])
                       - balanced_accuracy_from_sums(s[1], s[0], s[3], s[2]))[:, 0],
            unit=clip, group=np.zeros(len(m), np.int64), values=[*t_a, t_b[1], t_b[3]], n_units=int(clip.max()) + 1,
            n_groups=1)
        ci, p_boot = percentile_interval(d), bootstrap_p_value(d)
    out = {"subset": a.subset.name, "run_a": a.name, "run_b": b.name, "rows": int(len(m)),
           "balanced_accuracy_a": ba_a, "balanced_accuracy_b": ba_b, "difference": diff,
           "difference_ci_low": ci[0] if ci else None, "difference_ci_high": ci[1] if ci else None,
           "p_bootstrap": p_boot, "a_right_b_wrong": n_ab, "b_right_a_wrong": n_ba, "p_sign_flip": p_flip}
    ha, hb = (headline_draws(m, side, r, bootstrap=bootstrap) for side, r in (("a", a), ("b", b)))
    for name in ("macro_auroc", "cv_balanced_accuracy"):
        (va, da), (vb, db) = ha[name], hb[name]
        defined = va is not None and vb is not None
        d = db - da if defined else np.empty(0)  # the same resamples: a paired difference
        ci = percentile_interval(d)
        out.update({f"{name}_a": va, f"{name}_b": vb, f"{name}_difference": vb - va if defined else None,
                    f"{name}_difference_ci_low": ci[0] if ci else None,
                    f"{name}_difference_ci_high": ci[1] if ci else None, f"{name}_p_bootstrap": bootstrap_p_value(d)})
    return out


def paired_by_slice(a: Run, b: Run, *, bootstrap: Bootstrap) -> list[dict]:
    """Per value of the subset's type slice (task type / polarity): BA(B) − BA(A) on the rows
    both scored, with its paired clip-bootstrap interval and p, and the Benjamini–Hochberg q over
    the slices of this pair ("A differs from B" in how many slices, by chance alone?)."""
    from .metrics import bh_q_values

    col = a.subset.type_slice
    m = paired_rows(a, b)
    if len(m) == 0:
        return []
    t, pa, pb = (m[c].to_numpy() for c in ("majority_present", "pred_present_a", "pred_present_b"))
    clip = pd.factorize(m["clip"], sort=True)[0]
    group, values = pd.factorize(m[col], sort=True)
    t_a, t_b = confusion_counts(t, pa), confusion_counts(t, pb)
    d = bootstrap.grouped(lambda s: (balanced_accuracy_from_sums(s[4], s[0], s[5], s[2])
                                     - balanced_accuracy_from_sums(s[1], s[0], s[3], s[2])),
                          unit=clip, group=group, values=[*t_a, t_b[1], t_b[3]], n_units=int(clip.max()) + 1,
                          n_groups=len(values))
    rows = []
    for g, value in enumerate(values):
        sel = group == g
        ba_a, ba_b = binary_metrics(t[sel], pa[sel])["balanced_accuracy"], binary_metrics(t[sel], pb[sel])["balanced_accuracy"]
        defined = ba_a is not None and ba_b is not None
        ci = percentile_interval(d[:, g]) if defined else None
        rows.append({"subset": a.subset.name, "run_a": a.name, "run_b": b.name, "slice": f"{col}={value}",
                     "rows": int(sel.sum()), "difference": ba_b - ba_a if defined else None,
                     "difference_ci_low": ci[0] if ci else None, "difference_ci_high": ci[1] if ci else None,
                     "p_bootstrap": bootstrap_p_value(d[:, g]) if defined else None})
    for row, q in zip(rows, bh_q_values([r["p_bootstrap"] for r in rows]), strict=True):
        row["q_bh"] = q
    return rows


def bootstrap_p_value(d: np.ndarray) -> float | None:
    """Two-sided p of a paired bootstrap: 2·min(P(Δ* ≤ 0), P(Δ* ≥ 0)) over the defined
    resamples, capped at 1; None when none is defined."""
    d = d[np.isfinite(d)]
    return float(min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0)))) if len(d) else None


def headline_draws(m: pd.DataFrame, side: str, run: Run, *, bootstrap: Bootstrap) -> dict:
    """One run's macro AUROC and cross-validated (per prompt) balanced accuracy on the paired
    rows ``m`` (columns ``similarity_<side>``, ``prompt_<side>``), each as ``(value or None,
    value on every clip resample)``."""
    if len(m) == 0:
        return {"macro_auroc": (None, np.empty(0)), "cv_balanced_accuracy": (None, np.empty(0))}
    t, s = m["majority_present"].to_numpy(), m[f"similarity_{side}"].to_numpy()
    clips = m["clip"].astype(str).to_numpy()
    full, draws = auroc_draws(t, s, clips, m[run.subset.category_slice].to_numpy(), bootstrap=bootstrap)
    cv = run.summary.get("thresholds_cv") or {}
    folds = clip_folds(clips, int(cv.get("folds", 5)), seed=int(cv.get("seed", bootstrap.seed)))
    ba, cv_draws, _ = cv_balanced_accuracy(t, s, clips, folds, float(run.summary.get("threshold", 0.0)),
                                           m[f"prompt_{side}"].to_numpy(), bootstrap=bootstrap)
    macro = float(full[1]) if np.isfinite(full[1]) else None
    return {"macro_auroc": (macro, draws[:, 1]), "cv_balanced_accuracy": (ba, cv_draws)}


def sign_flip_p_value(t: np.ndarray, pa: np.ndarray, pb: np.ndarray, clip: np.ndarray, *, draws: int, seed: int,
                      chunk: int = 256) -> float | None:
    """Two-sided p-value of the clip-level sign-flip permutation test of BA(B) − BA(A) (module
    docstring); None when the balanced accuracy is undefined (a class absent)."""
    t, pa, pb = (np.asarray(x, dtype=np.float64) for x in (t, pa, pb))
    pos, neg = t.sum(), (1 - t).sum()
    if pos == 0 or neg == 0:
        return None
    per_row = ((t * (pb - pa)) / pos + ((1 - t) * ((1 - pb) - (1 - pa))) / neg) / 2
    d = np.bincount(clip, weights=per_row)
    observed = abs(d.sum())
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, draws, chunk):
        signs = rng.integers(0, 2, size=(min(chunk, draws - start), len(d))) * 2.0 - 1.0
        extreme += int((np.abs(signs @ d) >= observed - 1e-12).sum())
    return (1 + extreme) / (1 + draws)


def leaderboard(runs_by_subset: dict[str, list[Run]]) -> pd.DataFrame:
    """Per run, subset and slice: balanced accuracy at the run's threshold with its interval; on
    the overall rows also the macro AUROC and the cross-validated (per prompt) balanced accuracy
    with their intervals (from the run's summary.json), the share of rows called present and
    ``one_class`` (that share or its complement ≥ :data:`ONE_CLASS_SHARE`). Overall rows are
    ranked by macro AUROC, then cross-validated, then fixed-threshold balanced accuracy; slice
    rows by balanced accuracy."""
    rows = []
    for name, runs in runs_by_subset.items():
        subset = SUBSETS[name]
        for r in runs:
            s = r.summary
            ok = r.predictions[r.predictions["ok"]]
            share = float(ok["pred_present"].mean()) if len(ok) else None
            a = s.get("auroc_headline") or {}
            cv = (s.get("thresholds_cv") or {}).get("per_prompt") or {}
            headlines = {"macro_auroc": a.get("macro_auroc"), "macro_auroc_ci_low": (a.get("macro_auroc_ci95") or [None])[0],
                         "macro_auroc_ci_high": (a.get("macro_auroc_ci95") or [None, None])[1],
                         "cv_balanced_accuracy": cv.get("balanced_accuracy"),
                         "cv_ci_low": (cv.get("ci95") or [None])[0], "cv_ci_high": (cv.get("ci95") or [None, None])[1],
                         "share_called_present": share,
                         "one_class": share is not None and max(share, 1 - share) >= ONE_CLASS_SHARE}
            slices = [("overall", s["overall"]), ("unanimous", s["unanimous_subset"])]
            slices += [(f"{subset.type_slice}={x[subset.type_slice]}", x) for x in s.get(f"by_{subset.type_slice}", [])]
            for label, m in slices:
                ci = m.get("balanced_accuracy_ci95") or [m.get("balanced_accuracy_ci_low"), m.get("balanced_accuracy_ci_high")]
                rows.append({"subset": name, "slice": label, "run": r.name, "n": m["n"],
                             "balanced_accuracy": m["balanced_accuracy"], "ci_low": ci[0], "ci_high": ci[1],
                             "threshold": s.get("threshold"), "mode": s.get("mode"),
                             **(headlines if label == "overall" else dict.fromkeys(headlines))})
    df = pd.DataFrame(rows, columns=["subset", "slice", "run", "n", "balanced_accuracy", "ci_low", "ci_high",
                                     "threshold", "mode", "macro_auroc", "macro_auroc_ci_low", "macro_auroc_ci_high",
                                     "cv_balanced_accuracy", "cv_ci_low", "cv_ci_high", "share_called_present",
                                     "one_class"])
    order = {n: i for i, n in enumerate(runs_by_subset)}
    df["_s"] = df["subset"].map(order)
    df["_slice"] = df["slice"].map(lambda x: (0 if x == "overall" else 1 if x == "unanimous" else 2, x))
    df = df.sort_values(["_s", "_slice", "macro_auroc", "cv_balanced_accuracy", "balanced_accuracy", "run"],
                        ascending=[True, True, False, False, False, True], na_position="last", kind="stable")
    return df.drop(columns=["_s", "_slice"]).reset_index(drop=True)


REFERENCES = ("majority", "dawid_skene", "one_coin_dawid_skene", "mace")


def ranks_by_reference(runs_by_subset: dict[str, list[Run]]) -> pd.DataFrame:
    """Per subset, reference label (the majority, and each rater model of the runs'
    ``against_rater_models``) and run: the run's macro AUROC against that reference and its rank
    (1 = best, ties share the mean rank; a run without the figure ranks last), and
    ``rank_flip``: whether the order of the runs differs from their order against the majority.
    A point-estimate check, to read beside the rank intervals: a flip inside overlapping
    intervals says the ranking rests on the choice of label, not that it reverses."""
    from scipy.stats import rankdata

    rows = []
    for name, runs in runs_by_subset.items():
        majority = None
        for ref in REFERENCES:
            if ref == "majority":
                values = [(r.summary.get("auroc_headline") or {}).get("macro_auroc") for r in runs]
            else:
                values = [((r.summary.get("against_rater_models") or {}).get(ref) or {}).get("macro_auroc") for r in runs]
            if all(v is None for v in values):
                continue  # no run has this reference (an analysis run without rater models, or one class only)
            ranks = rankdata([-np.inf if v is None else -v for v in values])
            majority = ranks if ref == "majority" else majority  # REFERENCES begins with the majority
            flip = majority is not None and not np.array_equal(ranks, majority)
            rows += [{"subset": name, "reference": ref, "run": r.name, "macro_auroc": v, "rank": float(k), "rank_flip": flip}
                     for r, v, k in zip(runs, values, ranks, strict=True)]
    return pd.DataFrame(rows, columns=["subset", "reference", "run", "macro_auroc", "rank", "rank_flip"])


def compare(folders: list[Path], names: list[str], *, bootstrap: Bootstrap):
    runs_by_subset: dict[str, list[Run]] = {}
    for subset in SUBSETS.values():
        runs = [load_run(f, n, subset) for f, n in zip(folders, names, strict=True)]
        present = [r for r in runs if r is not None]
        if not present:
            continue
        if len(present) < len(runs):
            missing = [n for n, r in zip(names, runs, strict=True) if r is None]
            raise InputError(folders[names.index(missing[0])] / subset.name / "predictions.csv",
                             f"not found, but other runs have {subset.name}; compare runs of the same subsets")
        check_comparable(present)
        runs_by_subset[subset.name] = present
    if not runs_by_subset:
        raise InputError(folders[0], "holds no <subset>/predictions.csv; expected benchmark.py output folders")
    run_pairs = [(a, b) for runs in runs_by_subset.values() for a, b in combinations(runs, 2)]
    pairs = pd.DataFrame([paired_test(a, b, bootstrap=bootstrap) for a, b in run_pairs])
    by_slice = pd.DataFrame([row for a, b in run_pairs for row in paired_by_slice(a, b, bootstrap=bootstrap)],
                                           columns=["subset", "run_a", "run_b", "slice", "rows", "difference",
                                                    "difference_ci_low", "difference_ci_high", "p_bootstrap", "q_bh"])
    board = leaderboard(runs_by_subset)
    ranks = pd.DataFrame([r for runs in runs_by_subset.values() for r in rank_intervals(runs, bootstrap=bootstrap)],
                         columns=["subset", "run", "rank", "rank_low", "rank_high", "rank_rows"])
    board = board.merge(ranks.assign(slice="overall"), on=["subset", "slice", "run"], how="left")
    return board, pairs, by_slice, ranks_by_reference(runs_by_subset)


def rank_intervals(runs: list[Run], *, bootstrap: Bootstrap) -> list[dict]:
    """Each run's rank by macro AUROC (1 = best; ties share the mean rank) on the rows every run
    scored, and its 95 % percentile interval over clip resamples — the same resamples for every
    run, as Arena-Hard ranks models."""
    key = list(runs[0].subset.item_key)
    m = runs[0].predictions[list(dict.fromkeys([*key, "majority_present", "clip", runs[0].subset.category_slice]))]
    for i, r in enumerate(runs):
        m = m.merge(r.predictions[[*key, "ok", "similarity"]].rename(columns={"ok": f"ok{i}", "similarity": f"s{i}"}),
                    on=key)
    m = m.sort_values(key, kind="stable").reset_index(drop=True)
    m = m[np.logical_and.reduce([m[f"ok{i}"] for i in range(len(runs))])]
    if len(m) == 0:
        return [{"subset": r.subset.name, "run": r.name, "rank": None, "rank_low": None, "rank_high": None,
                 "rank_rows": 0} for r in runs]
    t, clips = m["majority_present"].to_numpy(), m["clip"].astype(str).to_numpy()
    cats = m[runs[0].subset.category_slice].to_numpy()
    values, draws = [], []
    for i in range(len(runs)):
        full, d = auroc_draws(t, m[f"s{i}"].to_numpy(), clips, cats, bootstrap=bootstrap)
        values.append(full[1])
        draws.append(d[:, 1])
    from scipy.stats import rankdata

    point = rankdata(-np.nan_to_num(np.array(values), nan=-np.inf))
    per_draw = rankdata(-np.nan_to_num(np.column_stack(draws), nan=-np.inf), axis=1)  # draws × runs
    out = []
    for i, r in enumerate(runs):
        lo, hi = np.percentile(per_draw[:, i], [2.5, 97.5]) if len(per_draw) else (None, None)
        out.append({"subset": r.subset.name, "run": r.name, "rank": float(point[i]),
                    "rank_low": None if lo is None else float(lo), "rank_high": None if hi is None else float(hi),
                    "rank_rows": int(len(m))})
    return out


def separability(pairs: pd.DataFrame) -> dict:
    """Per subset: the share of run pairs whose paired 95 % interval of the macro AUROC difference
    excludes 0 — how well the benchmark tells its runs apart (Arena-Hard's separability)."""
    out = {}
    for name, g in pairs.groupby("subset", sort=False):
        lo, hi = g["macro_auroc_difference_ci_low"], g["macro_auroc_difference_ci_high"]
        defined = lo.notna() & hi.notna()
        separated = int(((lo > 0) | (hi < 0))[defined].sum())
        out[name] = {"pairs": int(defined.sum()), "separated": separated,
                     "share": separated / int(defined.sum()) if defined.any() else None}
    return out
