"""Turn scored rows into predictions, metric tables and summary.json (README: “3. benchmark.py”)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .alt_test import EPSILON as ALT_EPSILON
from .alt_test import alt_test_with_control
from .ceiling import ceiling_block, dawid_skene_refit, mean_rating_reliability, vote_agreement
from .defaults import BOOTSTRAP_SEED, MIN_ITEMS
from .metrics import (
    MIN_CLASS_ROWS,
    band,
    best_threshold,
    binary_metrics,
    slice_intervals,
    slice_report,
    verdict,
)
from .ranking import auroc_with_intervals
from .rater_models import MODELS, pairwise_agreement_per_item
from .resampling import Bootstrap, percentile_interval
from .scorers import ScoreResult
from .soft_labels import soft_label_block
from .subsets import Subset
from .summary import SliceRow, Support
from .templates import template_report
from .thresholds import clip_folds, cv_balanced_accuracy
from .vs_humans import graded_agreement, scorer_decisions, votes_of_scored, vs_humans

AUDIO_MISSING = "audio_missing"
SLICE_FIELDS = ("n", "accuracy", "balanced_accuracy", "f1")
HEADLINE_FIELDS = ("n", "accuracy", "balanced_accuracy", "precision", "recall", "f1", "tp", "fp", "tn", "fn")
EXTRA_FIELDS = ("precision", "recall", "specificity", "auroc", "average_precision",
                "balanced_accuracy_ci_low", "balanced_accuracy_ci_high", "tp", "fp", "tn", "fn", "n_positive", "n_negative",
                "balanced_accuracy_p_chance", "balanced_accuracy_q_bh", "balanced_accuracy_mde80")


@dataclass
class BenchmarkResult:
    subset: Subset
    predictions: pd.DataFrame
    tables: dict[str, pd.DataFrame]  # file name -> metrics table
    summary: dict
    truth: np.ndarray  # of the rows scored ok, for the figures
    scores: np.ndarray


def predictions_frame(rows: pd.DataFrame, result: ScoreResult | None, subset: Subset, threshold: float,
                      dataset_root: Path | str = "dataset", template_sims: list[np.ndarray] | None = None) -> pd.DataFrame:
    """predictions.csv: one row per selected item; rows without audio are ``audio_missing``, rows
    whose clip may not be read carry the reason (``audio_refused: …``).

    With several prompt templates (``template_sims``: each template's similarities of the scored
    rows), ``similarity`` is their ensemble, ``prompt`` the first template's text, and each
    template's own similarity follows in ``similarity_template_<k>``.

    ``audio_path`` is written as ``<dataset root>/<path below it>``: with the default root this is
    exactly what upstream writes when run from the project folder. A missing clip whose place
    follows from the item (``Subset.expected_audio_paths``: dim) is named there too, as upstream
    does; one found by search (emo) is left empty.
    """
    has_audio = rows["scorable"].to_numpy(dtype=bool)
    sim = np.full(len(rows), np.nan)
    # unscored rows: the clip is missing, or was found but may not be read (its reason)
    error = np.where(rows["audio_path"].isna(), AUDIO_MISSING, rows["audio_error"].astype(object)).astype(object)
    if result is not None:
        sim[has_audio] = result.similarity
        error[has_audio] = result.error
    ok = pd.isna(error) & np.isfinite(sim)
    pred = pd.array(np.where(ok, (sim >= threshold).astype(np.int64), 0), dtype="Int64")
    pred[~ok] = pd.NA
    out = rows[[*subset.item_key, "benchmark_bucket", "n_raters", "majority_present"]].copy()
    root = Path(dataset_root).as_posix().rstrip("/")
    rels = rows["audio_path"]
    if subset.expected_audio_paths is not None and len(rows):  # a missing clip: where it belongs, as upstream
        rels = rels.where(rels.notna(), subset.expected_audio_paths(rows))
    out["audio_path"] = [None if rel is None or rel != rel else f"{root}/{rel}" for rel in rels]
    out["prompt"] = rows["prompt"].to_numpy(dtype=object)
    out["similarity"] = sim
    out["pred_present"] = pred
    out["ok"] = ok
    out["error"] = np.where(ok, None, error)
    if template_sims is not None and len(template_sims) > 1:
        for k, sims in enumerate(template_sims, start=1):
            column = np.full(len(rows), np.nan)
            column[has_audio] = sims
            out[f"similarity_template_{k}"] = column
    return out.reset_index(drop=True)


def _record(key: str, value, m: dict, fields) -> dict:
    return {key: value, **{f: m[f] for f in fields}, **{f: m[f] for f in EXTRA_FIELDS if f not in fields}}


EVALUATION_STEPS = 6
HUMAN_REFERENCE = "human_balanced_accuracy_binary"
COUNT_COLUMNS = ("tp", "fp", "tn", "fn", "n_positive", "n_negative")


def evaluate(subset: Subset, rows: pd.DataFrame, predictions: pd.DataFrame, *, mode: str, endpoint,
             threshold: float, filter_mode: str, filter_stats: dict, human: dict, votes: pd.DataFrame | None = None,
             bootstrap: Bootstrap, min_class_rows: int = MIN_CLASS_ROWS, min_items: int = MIN_ITEMS,
             human_reliable: dict | None = None,
             cv_folds: int = 5, cv_seed: int = BOOTSTRAP_SEED, scorer_info: dict | None = None,
             alt_epsilon: float = ALT_EPSILON, rater_models: pd.DataFrame | None = None,
             rater_channels: tuple[float, float, int] | None = None, similarity_is_logit: bool = False,
             templates: list[str] | None = None, progress=None) -> BenchmarkResult:
    """Metrics, tables and summary.json of one subset's run; ``progress.update(1)`` after each of
    its :data:`EVALUATION_STEPS` interval families (the slice tables, AUROC, the cross-validated
    thresholds, the model against the humans, the graded labels, the soft labels and the noise
    ceiling). ``rater_models``: rater_models.csv (labels and posteriors), ``rater_channels``: the
    raters' mean Dawid–Skene sensitivity and specificity and the rounds of the fit (both from the
    analysis run; None: the figures that need them are left out); ``similarity_is_logit``: the similarity is a logit
    (``--similarity logit``), so σ(similarity) is the model's probability (:mod:`soft_labels`).
    ``templates`` (when more than one):
    the prompt templates whose similarities are ``similarity_template_<k>`` of ``predictions``;
    adds metrics_by_template.csv and the ``prompt_templates`` block (:mod:`templates`)."""
    scored = predictions[predictions["ok"]].copy()
    scored["pred_present"] = scored["pred_present"].astype(np.int64)
    scored["clip"] = rows.loc[predictions["ok"].to_numpy(), "clip"].to_numpy()
    scored["all_agree_binary"] = rows.loc[predictions["ok"].to_numpy(), "all_agree_binary"].to_numpy()

    keys = [subset.type_slice, "benchmark_bucket", subset.category_slice]
    step = progress.update if progress is not None else (lambda n: None)  # one step per interval family
    overall, unanimous, by_key = slice_report(scored, keys, bootstrap=bootstrap, min_class_rows=min_class_rows)
    step(1)
    tables = {f"metrics_by_{k}.csv": by_key[k] for k in keys}
    p = float(predictions["majority_present"].mean()) if len(predictions) else None
    sims = scored["similarity"].to_numpy()
    human_reliable = dict(human_reliable) if human_reliable is not None else {k: True for k in human}
    # the humans' own balanced accuracy (each rater against each other), when it rests on enough items
    human_ba = human.get(HUMAN_REFERENCE) if human_reliable.get(HUMAN_REFERENCE) else None

    def headline(row: SliceRow) -> dict:
        m = row.record()
        out = {f: m[f] for f in HEADLINE_FIELDS}
        out["specificity"] = m["specificity"]
        out["auroc"], out["average_precision"] = m["auroc"], m["average_precision"]
        lo, hi = m["balanced_accuracy_ci_low"], m["balanced_accuracy_ci_high"]
        out["balanced_accuracy_ci95"] = None if lo is None else [lo, hi]
        out["n_positive"], out["n_negative"] = m["n_positive"], m["n_negative"]
        out["band"] = band(m["balanced_accuracy"])  # upstream's absolute band
        out["verdict"] = verdict(m["balanced_accuracy"], out["balanced_accuracy_ci95"],
                                 enough=min(m["n_positive"], m["n_negative"]) >= min_class_rows, human=human_ba)
        return out

    s: dict = {
        "subset": subset.name,
        "mode": mode,
        "endpoint": endpoint,
        "threshold": float(threshold),
        "filter_mode": filter_mode,
        "filter_stats": filter_stats,
        "rows_total": int(len(predictions)),
        "rows_evaluated_ok": int(predictions["ok"].sum()),
        "missing_audio": int((predictions["error"] == AUDIO_MISSING).sum()),
        "evaluation_errors": int((~predictions["ok"] & (predictions["error"] != AUDIO_MISSING)).sum()),
        "majority_baseline": max(p, 1 - p) if p is not None else 0.5,
        **human,
        "overall": headline(overall),
        "unanimous_subset": headline(unanimous),
    }
    for key, file in ((subset.type_slice, f"metrics_by_{subset.type_slice}.csv"),
                      ("benchmark_bucket", "metrics_by_benchmark_bucket.csv"),
                      (subset.category_slice, f"metrics_by_{subset.category_slice}.csv")):
        t = tables[file]
        s[f"by_{key}"] = [_record(key, r[key], r, SLICE_FIELDS) for r in t.to_dict(orient="records")]
    # [ours] the count columns upstream does not write are whole numbers in the CSVs (n stays 3.0, as upstream)
    for t in tables.values():
        t[list(COUNT_COLUMNS)] = t[list(COUNT_COLUMNS)].astype("Int64")
    s["similarity"] = ({"min": float(sims.min()), "median": float(np.median(sims)), "max": float(sims.max())}
                       if len(sims) else {"min": None, "median": None, "max": None})
    s["best_threshold"] = best_threshold(scored["majority_present"].to_numpy(), sims)
    # [ours] say what it is: chosen on the very rows it would be scored on
    s["best_threshold"]["tuned_on_the_scored_rows"] = True
    # [ours] how much each label rests on: one vote, or an even split resolved to "absent"
    s["label_support"] = label_support(rows)
    s["bootstrap"] = {"seed": bootstrap.seed, "draws": bootstrap.draws, "unit": "clip", "interval": "percentile 95%"}
    s["min_class_rows"] = int(min_class_rows)
    s["min_items"] = int(min_items)  # the analysis run's --min-items: figures on fewer items are withheld
    # whether each human_* figure above rests on enough items (the analysis run's verdict)
    s["human_reliable"] = human_reliable
    # [ours] what the verdicts compare a balanced accuracy with (None: no reliable human figure)
    s["human_reference"] = {"key": HUMAN_REFERENCE, "balanced_accuracy": human_ba}
    # [ours] the baseline that costs nothing: the sampling prior as a decision, against the majority
    prior = subset.prior_present(scored)
    s["sampling_prior_vs_majority"] = {k: v for k, v in binary_metrics(scored["majority_present"].to_numpy(), prior).items()
                                       if k in ("n", "accuracy", "balanced_accuracy")}
    # [ours] threshold-free and cross-validated headlines: nothing here is tuned on the rows it scores
    truth, clips = scored["majority_present"].to_numpy(), scored["clip"].astype(str).to_numpy()
    a = s["auroc_headline"] = auroc_with_intervals(truth, sims, clips, scored[subset.category_slice].to_numpy(),
                                                 bootstrap=bootstrap)
    enough = min(int(truth.sum()), int(len(truth) - truth.sum())) >= min_class_rows
    a["auroc_verdict"] = verdict(a["auroc"], a["auroc_ci95"], enough=enough)
    a["macro_auroc_verdict"] = verdict(a["macro_auroc"], a["macro_auroc_ci95"], enough=enough)
    step(1)
    s["thresholds_cv"] = cv_headlines(truth, sims, clips, scored["prompt"].to_numpy(), threshold, cv_folds, cv_seed=cv_seed,
                                      bootstrap=bootstrap, min_class_rows=min_class_rows, human=human_ba)
    if rater_models is not None and len(scored):  # [ours] the headlines against each rater model's label
        s["against_rater_models"] = against_rater_models(scored, rater_models, subset, sims, clips, threshold,
                                                         cv_folds=cv_folds, cv_seed=cv_seed, bootstrap=bootstrap,
                                                         min_class_rows=min_class_rows, human=human_ba)
    if scorer_info is not None:  # [ours] which model, loaded how
        s["scorer"] = scorer_info
    if templates is not None and len(templates) > 1:  # [ours] each prompt wording, and their ensemble
        per_template = [scored[f"similarity_template_{k}"].to_numpy() for k in range(1, len(templates) + 1)]
        tables["metrics_by_template.csv"], s["prompt_templates"] = template_report(templates, truth, per_template, sims,
                                                                                   threshold)
    step(1)
    if votes is not None:  # [ours] the model as one more rater, on the humans' own targets
        s["vs_humans"] = vs_humans(scored, votes, subset, bootstrap=bootstrap, support=Support(min_items))
        step(1)
        s["graded"] = graded_agreement(scored, votes, subset, bootstrap=bootstrap, support=Support(min_items))
        s["alt_test"] = alt_test_block(scored.reset_index(drop=True), votes, subset, epsilon=alt_epsilon,
                                       seed=bootstrap.seed)
        step(1)
        # [ours] the vote fractions instead of the majority, and the ceiling the votes' noise sets
        posterior = model_column(scored, rater_models, subset, "dawid_skene_present_probability")
        folds = clip_folds(clips, cv_folds, seed=cv_seed) if len(scored) else np.empty(0, np.int64)
        s["soft_labels"], calibration = soft_label_block(scored, votes, subset, logit=similarity_is_logit, folds=folds,
                                                         bootstrap=bootstrap, ds_posterior=posterior)
        if len(calibration):
            tables["calibration.csv"] = calibration
        s["noise_ceiling"] = noise_ceiling(scored, votes, subset, rater_channels, bootstrap=bootstrap)
        step(1)
    else:
        step(3)
    return BenchmarkResult(subset, predictions, tables, s, scored["majority_present"].to_numpy(), sims)


def alt_test_block(scored: pd.DataFrame, votes: pd.DataFrame, subset: Subset, *, epsilon: float, seed: int) -> dict:
    """``summary.json["alt_test"]``: the alternative annotator test (:mod:`alt_test`) of the model
    and of the sampling prior at ``epsilon`` and at ε = 0 (the model at least as aligned with the
    group as each human), each with the random-rater control, on all scored items and within each
    value of the type and category slices (a slice whose raters have too few items says "too
    few", with the counts)."""
    frame, names = votes_of_scored(scored, votes, subset)
    decisions = scorer_decisions(scored, subset)

    def test(votes_frame: pd.DataFrame, decision: np.ndarray, alignment: str = "exact") -> dict:
        out = alt_test_with_control(votes_frame, decision, names, epsilon=epsilon, seed=seed, alignment=alignment)
        strict = alt_test_with_control(votes_frame, decision, names, epsilon=0.0, seed=seed, alignment=alignment)
        out["at_epsilon_0"] = {k: strict[k] for k in ("winning_rate", "verdict")}  # no allowance for cost
        return out

    out = {name: test(frame, d) for name, d in decisions.items()}
    if subset.ordinal:  # the ordinal variant: ranks of the ratings and of the similarities
        from scipy.stats import rankdata

        key = list(subset.item_key)
        at = pd.MultiIndex.from_frame(scored[key]).get_indexer(pd.MultiIndex.from_frame(votes[key]))
        value = votes["value"].to_numpy(np.float64)[at >= 0]
        ranks = frame.assign(rank=pd.Series(value).groupby(frame["rater"].to_numpy()).rank(pct=True).to_numpy())
        sims = rankdata(scored["similarity"].to_numpy()) / len(scored)
        out["model_ordinal"] = test(ranks, sims, "rank")
    for column in (subset.type_slice, subset.category_slice):  # within each task type, and each emotion / dimension
        slice_of = scored[column].to_numpy()
        out[f"by_{column}"] = [
            {column: value, **{name: test(frame[slice_of[frame["item"]] == value], d) for name, d in decisions.items()}}
            for value in sorted(pd.unique(slice_of))]
    return out


def model_column(scored: pd.DataFrame, rater_models: pd.DataFrame | None, subset: Subset, column: str):
    """``column`` of rater_models.csv for each scored row; None without the file or when a scored
    item is missing from it (the analysis run differs from the labels)."""
    if rater_models is None or column not in rater_models:
        return None
    keys = list(subset.item_key)
    at = pd.MultiIndex.from_frame(rater_models[keys]).get_indexer(pd.MultiIndex.from_frame(scored[keys]))
    return None if (at < 0).any() else rater_models[column].to_numpy()[at]


def against_rater_models(scored: pd.DataFrame, rater_models: pd.DataFrame, subset: Subset, sims, clips,
                         threshold: float, *, cv_folds: int, cv_seed: int, bootstrap: Bootstrap,
                         min_class_rows: int, human: float | None = None) -> dict:
    """The headlines with each rater model's label (rater_models.csv: Dawid–Skene, one-coin
    Dawid–Skene, MACE) as the truth instead of the majority: macro and pooled AUROC, the
    balanced accuracy at the threshold and the cross-validated one per prompt, each with its
    clip-bootstrap interval and verdict, on the same scored rows; and how many of those rows'
    labels differ from the majority. A model whose labels hold one class only (one-coin
    Dawid–Skene calls every real emo item present) gets None figures and ``one_class``. None for
    a model when a scored item lacks its label (the analysis run differs from the labels)."""
    out = {}
    pred = scored["pred_present"].to_numpy(np.int64)
    for name in MODELS:
        truth = model_column(scored, rater_models, subset, f"{name}_label")
        if truth is None:
            out[name] = None
            continue
        fixed = slice_intervals(truth, pred, clips, [np.zeros(len(truth), np.int64)], bootstrap=bootstrap)[0][0]
        enough = min(int(truth.sum()), int(len(truth) - truth.sum())) >= min_class_rows
        ba = binary_metrics(truth, pred)["balanced_accuracy"]
        a = auroc_with_intervals(truth, sims, clips, scored[subset.category_slice].to_numpy(), bootstrap=bootstrap)
        cv = cv_headlines(truth, sims, clips, scored["prompt"].to_numpy(), threshold, cv_folds, cv_seed=cv_seed,
                          bootstrap=bootstrap, min_class_rows=min_class_rows, kinds=("per_prompt",),
                          human=human).get("per_prompt", {})
        ci = list(fixed[0]) if fixed and enough else None
        out[name] = {"rows": int(len(truth)), "one_class": bool(truth.min() == truth.max()),
                     "labels_differ_from_majority": int((truth != scored["majority_present"].to_numpy()).sum()),
                     "macro_auroc": a["macro_auroc"], "macro_auroc_ci95": a["macro_auroc_ci95"],
                     "macro_auroc_verdict": verdict(a["macro_auroc"], a["macro_auroc_ci95"], enough=enough),
                     "auroc": a["auroc"], "auroc_ci95": a["auroc_ci95"],
                     "balanced_accuracy": ba, "balanced_accuracy_ci95": ci,
                     "balanced_accuracy_verdict": verdict(ba, ci, enough=enough, human=human),
                     "cv_balanced_accuracy_per_prompt": cv.get("balanced_accuracy"),
                     "cv_balanced_accuracy_per_prompt_ci95": cv.get("ci95"),
                     "cv_balanced_accuracy_per_prompt_verdict": cv.get("verdict")}
    return out


def noise_ceiling(scored: pd.DataFrame, votes: pd.DataFrame, subset: Subset, fit: tuple[float, float, int] | None, *,
                  bootstrap: Bootstrap) -> dict | None:
    """``summary.json["noise_ceiling"]`` on the scored items (:mod:`ceiling`): the ceiling, the
    votes' own and the constant predictor, the agreement with the votes of the model, the
    sampling prior and the humans (pairs of raters) with the headroom each reaches, and the
    reliability of the mean rating; clips resampled. Dawid–Skene is fitted on the scored items'
    votes as the analysis run fitted it (``fit``: its mean channels and rounds, as
    :func:`io.load_rater_channels` reads them), and again in every resample. None without that
    fit."""
    n = len(scored)
    if fit is None or not n:
        return None
    frame, names = votes_of_scored(scored, votes, subset)
    clip = pd.factorize(scored["clip"].astype(str), sort=True)[0]
    item, vote = frame["item"].to_numpy(), frame["binary"].to_numpy()
    agreements = {name: vote_agreement(d, item, vote, n) for name, d in scorer_decisions(scored, subset).items()}
    agreements["humans"] = pairwise_agreement_per_item(frame, n)
    refit = dawid_skene_refit(item, frame["rater"].to_numpy(), vote, n, len(names), fit[2])
    out = ceiling_block(refit, clip, bootstrap=bootstrap, channels=fit[:2], agreements=agreements)
    out["mean_rating_reliability"] = mean_rating_reliability(frame["value"].to_numpy(np.float64), item, clip,
                                                             bootstrap=bootstrap)
    return out


def label_support(rows: pd.DataFrame) -> dict:
    """Of the scored items' majority labels: how many rest on one rater's vote, and how many on
    an even split of the raters resolved to "absent" (upstream's rule: a tie goes to the smaller
    value). Neither is a label several people agreed on."""
    one = rows["n_raters"].to_numpy() == 1
    tie = rows["majority_present_tie"].to_numpy(dtype=bool)
    return {"items": int(len(rows)), "one_rater": int(one.sum()), "tie_resolved_to_absent": int(tie.sum()),
            "several_raters_agreeing": int((~one & ~tie).sum())}


def cv_headlines(truth, sims, clips, prompts, threshold: float, k: int, *, cv_seed: int, bootstrap: Bootstrap,
                 min_class_rows: int, human: float | None = None, kinds=("global", "per_prompt")) -> dict:
    """Balanced accuracy of out-of-fold decisions (:mod:`thresholds`) with one global threshold and
    with one threshold per prompt (``kinds``: which of the two), each with its clip-bootstrap
    interval re-running the whole cross-validation in every resample (none when a class has fewer
    than ``min_class_rows`` rows)."""
    out = {"folds": int(k), "seed": int(cv_seed), "unit": "clip",
           "definition": "threshold maximising balanced accuracy on the other folds, applied to each fold",
           "interval": "percentile 95%, thresholds re-chosen in every clip resample"}
    if len(truth) == 0:
        return out
    folds = clip_folds(clips, k, seed=cv_seed)
    enough = min(int(truth.sum()), int(len(truth) - truth.sum())) >= min_class_rows
    for name, groups in (("global", None), ("per_prompt", prompts)):
        if name not in kinds:
            continue
        ba, draws, applied = cv_balanced_accuracy(truth, sims, clips, folds, threshold, groups, bootstrap=bootstrap)
        interval = percentile_interval(draws)
        m = binary_metrics(truth, (sims >= applied).astype(np.int64))
        ci = list(interval) if interval and enough else None
        out[name] = {"balanced_accuracy": ba, "ci95": ci, "verdict": verdict(ba, ci, enough=enough, human=human),
                     "accuracy": m["accuracy"], "n": m["n"],
                     "thresholds": {"min": float(applied.min()), "median": float(np.median(applied)),
                                    "max": float(applied.max())}}
    return out


def error_causes(predictions: pd.DataFrame, top: int = 3) -> str:
    """The most frequent reasons rows were not scored, counted: ``"300 × audio_missing; 2 × HTTP
    500 after 17 attempts"`` (and how many other reasons), or "" when every row was scored."""
    counts = predictions.loc[~predictions["ok"], "error"].astype(str).value_counts()
    if counts.empty:
        return ""
    shown = "; ".join(f"{n:,} × {cause}" for cause, n in counts.head(top).items())
    return shown + (f"; {len(counts) - top} other reason(s) in predictions.csv" if len(counts) > top else "")
