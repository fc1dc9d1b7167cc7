"""Figures for the reports: matplotlib's object API on the Agg canvas, PNG bytes out.

Every figure is drawn from numbers that the rest of the package computes and tests (the curves
come from :mod:`emolia_bench.metrics`); nothing here computes a statistic. matplotlib is imported
only when a figure is drawn, so a ``--no-figures`` run never imports it.
"""

from __future__ import annotations

import io

import numpy as np

DPI = 110
BLUE, ORANGE, GREY, GREEN = "#3465a4", "#f57900", "#888a85", "#4e9a06"


def _figure(width: float = 6.4, height: float = 3.6, xlabels: list[str] | None = None, xsize: float = 9,
            rotated: bool = False, ylabels: list[str] | None = None, ysize: float = 9, xlabel: bool = True):
    """A figure with one axes and fixed margins, sized from the tick labels it will carry.

    Margins are computed here instead of by matplotlib's constrained-layout solver, which
    measures every text's extent and draws each figure twice (bench/README.md has the cost)."""
    from matplotlib.figure import Figure

    char = 0.6 / 72  # inches per point of font size, per character (a generous average width)
    longest_x = max((len(t) for t in xlabels or []), default=3)
    bottom = 0.25 + (longest_x * char * xsize if rotated else 0.2) + (0.25 if xlabel else 0)
    longest_y = max((len(t) for t in ylabels or []), default=4)
    left = 0.45 + longest_y * char * ysize
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=min(0.6, left / width), right=1 - 0.2 / width, bottom=min(0.6, bottom / height),
                        top=1 - 0.4 / height)
    return fig, fig.subplots()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # fixed metadata: same data, same bytes
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": "emolia-bench"})
    return buf.getvalue()


def _interval_errors(values, lows, highs):
    v = np.array([np.nan if x is None else x for x in values], dtype=float)
    lo = np.array([np.nan if x is None else x for x in lows], dtype=float)
    hi = np.array([np.nan if x is None else x for x in highs], dtype=float)
    return v, np.vstack([np.where(np.isnan(lo), 0, v - lo), np.where(np.isnan(hi), 0, hi - v)])


# ---------------------------------------------------------------------------------------------
# analysis


def rater_coverage(summaries: list[dict]) -> bytes:
    """Items by number of raters, one group of bars per subset."""
    fig, ax = _figure()
    counts = sorted({int(k) for s in summaries for k in s["rater_coverage"]})
    width = 0.8 / max(len(summaries), 1)
    for i, s in enumerate(summaries):
        ys = [s["rater_coverage"].get(str(c), 0) for c in counts]
        ax.bar(np.arange(len(counts)) + i * width, ys, width, label=s["subset"])
    ax.set_xticks(np.arange(len(counts)) + width * (len(summaries) - 1) / 2, [str(c) for c in counts])
    ax.set_xlabel("raters per item")
    ax.set_ylabel("items")
    ax.set_yscale("log")
    ax.set_title("Rater coverage")
    ax.legend()
    return _png(fig)


def slice_agreement(table, key: str, majority_col: str, unanimous_col: str, title: str) -> bytes:
    """Majority-positive rate and unanimous rate per slice (one slice table of the analysis: a
    DataFrame, or its columns as lists)."""
    names = [str(v) for v in table[key]]
    n = len(names)
    rotated, size = n > 8, 7 if n > 20 else 9
    fig, ax = _figure(max(6.4, 0.22 * n + 2), 3.8 + (0.08 * max(map(len, names), default=0) if rotated else 0),
                      xlabels=names, xsize=size, rotated=rotated, xlabel=False)
    x = np.arange(n)
    ax.bar(x - 0.2, table[majority_col], 0.4, label="majority positive", color=BLUE)
    ax.bar(x + 0.2, table[unanimous_col], 0.4, label="unanimous", color=ORANGE)
    ax.set_xticks(x, names, rotation=90 if rotated else 0, fontsize=size)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of items")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _png(fig)


def human_ceiling(summaries: list[dict]) -> bytes:
    """Human pairwise and leave-one-out accuracy per subset with their bootstrap intervals; a
    figure on fewer items than the run's ``--min-items`` is not drawn, its bar says so."""
    fig, ax = _figure()
    labels, values, lows, highs, colors, withheld = [], [], [], [], [], []
    for s in summaries:
        a = s["agreement"]
        detail = s.get("agreement_detail", {}).get("figures", {})
        for name, key, color in (("pairwise", "human_pairwise_accuracy", BLUE), ("LOO", "human_loo_accuracy", ORANGE)):
            ci = a.get(f"{key}_ci95") or [None, None]
            fig_detail = detail.get(key, {})
            few = fig_detail.get("reliable") is False  # withheld here as in the reports
            labels.append(f"{s['subset']}\n{name}")
            values.append(None if few else a.get(key))
            lows.append(None if few else ci[0])
            highs.append(None if few else ci[1])
            colors.append(color)
            smallest = fig_detail.get("min_pair_items")
            withheld.append(None if not few else f"a pair shares\nonly {smallest:,} items" if smallest is not None
                            else f"too few\nitems ({fig_detail.get('n_items', 0):,})")
    v, err = _interval_errors(values, lows, highs)
    for i, note in enumerate(withheld):
        if note:
            ax.text(i, 0.02, note, ha="center", va="bottom", fontsize=7, color=GREY)
    fig.subplots_adjust(bottom=0.2)  # two-line tick labels
    ax.bar(np.arange(len(v)), np.nan_to_num(v), yerr=err, color=colors, capsize=4)
    ax.axhline(0.5, color=GREY, linestyle="--", linewidth=1, label="chance")
    ax.set_xticks(np.arange(len(v)), labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (95 % CI)")
    ax.set_title("Human ceiling: raters against each other")
    ax.legend(fontsize=8)
    return _png(fig)


# ---------------------------------------------------------------------------------------------
# benchmark


def slice_balanced_accuracy(records: list[dict], key: str, summary: dict, title: str) -> bytes:
    """Balanced accuracy per slice with its clip-bootstrap interval, and the humans' balanced
    accuracies (pairwise, leave-one-out) on the same axis when they rest on enough items. A slice
    whose minority class has fewer than ``min_class_rows`` rows is marked, not drawn: its value is
    withheld everywhere, here too."""
    n = len(records)
    names = [str(r[key]) for r in records]
    rotated, size = n > 8, 7 if n > 20 else 9
    fig, ax = _figure(max(6.4, 0.22 * n + 2.5), 3.8 + (0.08 * max(map(len, names), default=0) if rotated else 0),
                      xlabels=names, xsize=size, rotated=rotated, xlabel=False)
    withheld = withheld_slices(records, summary.get("min_class_rows", 0))
    v, err = _interval_errors([None if w else r["balanced_accuracy"] for r, w in zip(records, withheld, strict=True)],
                              [r.get("balanced_accuracy_ci_low") for r in records],
                              [r.get("balanced_accuracy_ci_high") for r in records])
    x = np.arange(n)
    ax.errorbar(x[~withheld], v[~withheld], yerr=err[:, ~withheld], fmt="o", color=BLUE, capsize=3,
                label="model (95 % CI)")
    if withheld.any():
        ax.plot(x[withheld], np.full(withheld.sum(), 0.03), "x", color=GREY, label="too few rows of a class: withheld")
    shown = summary.get("human_reliable", {})  # a human figure on too few items is not drawn
    for key_, name, style in (("human_balanced_accuracy_binary", "human pairwise (balanced)", "-"),
                              ("human_loo_balanced_accuracy_binary", "human LOO (balanced)", "-.")):
        if summary.get(key_) is not None and shown.get(key_, True):
            ax.axhline(summary[key_], color=GREEN, linestyle=style, linewidth=1, label=name)
    ax.axhline(0.5, color=GREY, linestyle="--", linewidth=1, label="chance")
    ax.set_xticks(x, names, rotation=90 if rotated else 0, fontsize=size)
    ax.set_ylim(0, 1)
    ax.set_ylabel("balanced accuracy")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    return _png(fig)


def withheld_slices(records: list[dict], min_class_rows: int) -> np.ndarray:
    """Per slice record: True when its minority class has fewer than ``min_class_rows`` rows (or,
    without class counts, when it has no interval) — its balanced accuracy is not drawn."""
    return np.array([min(r.get("n_positive") or 0, r.get("n_negative") or 0) < min_class_rows
                     if r.get("n_positive") is not None else r.get("balanced_accuracy_ci_low") is None for r in records],
                    dtype=bool)


def roc_curve(truth: np.ndarray, scores: np.ndarray, auroc: float | None, title: str) -> bytes:
    fig, ax = _figure(4.6, 4.2)
    if auroc is not None:
        from .metrics import roc_points

        fpr, tpr = roc_points(truth, scores)
        ax.plot(fpr, tpr, color=BLUE, label=f"AUROC {auroc:.3f}")
    ax.plot([0, 1], [0, 1], color=GREY, linestyle="--", linewidth=1, label="chance")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def threshold_curve(truth: np.ndarray, scores: np.ndarray, used: float, best: dict, title: str) -> bytes:
    fig, ax = _figure()
    if len(scores) and truth.min() != truth.max():
        from .metrics import threshold_sweep

        grid, ba = threshold_sweep(truth, scores)
        ax.plot(grid, ba, color=BLUE, label="balanced accuracy")
    ax.axvline(used, color=ORANGE, linewidth=1.2, label=f"threshold used ({used:g})")
    if best.get("threshold") is not None:
        ax.axvline(best["threshold"], color=GREEN, linestyle="-.", linewidth=1.2,
                   label=f"best ({best['threshold']:.3f}: {best['balanced_accuracy']:.3f}) — not used")
    ax.axhline(0.5, color=GREY, linestyle="--", linewidth=1)
    ax.set_xlabel("threshold on similarity")
    ax.set_ylabel("balanced accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _png(fig)


def reliability_diagram(bins, title: str) -> bytes:
    """calibration.csv drawn: per bin of the probability (with rows), the mean vote fraction and
    the mean majority against the mean probability, with their clip-bootstrap intervals; the
    model beside the sampling prior. Empty bins are left out."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.4, 4.0))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.13, top=0.86, wspace=0.08)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (scorer, name) in zip(axes, (("model", "this model"), ("sampling_prior", "sampling prior")), strict=True):
        b = bins[(bins["scorer"] == scorer) & (bins["rows"] > 0)]
        x = b["mean_probability"].to_numpy(np.float64)
        for column, color, label, marker in (("vote_fraction", BLUE, "vote fraction", "o"), ("majority", ORANGE, "majority", "s")):
            y = b[f"mean_{column}"].to_numpy(np.float64)
            _, err = _interval_errors(y, b[f"{column}_ci_low"].to_numpy(np.float64), b[f"{column}_ci_high"].to_numpy(np.float64))
            ax.errorbar(x, y, yerr=err, color=color, marker=marker, linestyle="-", linewidth=1, markersize=4,
                        capsize=2, label=f"mean {label}")
        ax.plot([0, 1], [0, 1], color=GREY, linestyle="--", linewidth=1, label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("predicted probability of present (bin mean)")
        ax.set_title(name, fontsize=9)
    axes[0].set_ylabel("observed (bin mean)")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def comparison(rows: list[dict], title: str) -> bytes:
    """Leaderboard figure: balanced accuracy with its interval, one point per run and subset."""
    names = [f"{r['run']} ({r['subset']})" for r in rows]
    fig, ax = _figure(max(6.4, 3.5 + 0.06 * max(map(len, names), default=0)), 0.45 * len(rows) + 1.6,
                      ylabels=names, ysize=8)
    v, err = _interval_errors([r["balanced_accuracy"] for r in rows], [r["ci_low"] for r in rows],
                              [r["ci_high"] for r in rows])
    y = np.arange(len(rows))[::-1]
    ax.errorbar(v, y, xerr=err, fmt="o", color=BLUE, capsize=3)
    ax.axvline(0.5, color=GREY, linestyle="--", linewidth=1)
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("balanced accuracy (95 % clip-bootstrap CI)")
    ax.set_title(title)
    return _png(fig)


PAIRED = (("macro_auroc_difference", "macro AUROC", BLUE), ("cv_balanced_accuracy_difference", "CV balanced accuracy", GREEN),
          ("difference", "balanced accuracy at the threshold", ORANGE))


def paired_differences(pairs: list[dict]) -> bytes:
    """Each pair of runs (B − A, per subset): the paired differences in macro AUROC, in
    cross-validated balanced accuracy and in balanced accuracy at the fixed threshold, each with
    its paired clip-bootstrap interval; 0 marked."""
    labels, values, lows, highs, colours = [], [], [], [], []
    for p in pairs:
        for key, name, colour in PAIRED:
            base = key.removesuffix("difference")
            labels.append(f"{p['run_b']} − {p['run_a']} ({p['subset']}): {name}")
            values.append(p.get(key))
            lows.append(p.get(f"{base}difference_ci_low"))
            highs.append(p.get(f"{base}difference_ci_high"))
            colours.append(colour)
    fig, ax = _figure(max(6.4, 3.5 + 0.06 * max(map(len, labels), default=0)), 0.32 * len(labels) + 1.6,
                      ylabels=labels, ysize=8)
    v, err = _interval_errors(values, lows, highs)
    y = np.arange(len(labels))[::-1]
    for i in range(len(labels)):
        ax.errorbar(v[i:i + 1], y[i:i + 1], xerr=err[:, i:i + 1], fmt="o", color=colours[i], capsize=3)
    ax.axvline(0.0, color=GREY, linestyle="--", linewidth=1)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("paired difference B − A (95 % paired clip-bootstrap CI)")
    ax.set_title("Paired differences between runs")
    return _png(fig)


# ---------------------------------------------------------------------------------------------
# the sets of figures each stage writes


def subset_agreement_figures(r) -> tuple[dict[str, bytes], list, list]:
    """One subset's agreement charts (``r``: its :class:`analysis.SubsetAnalysis`): files
    (by path relative to the output root), the links its own report embeds, and the links the
    combined report embeds."""
    name = r.subset.name
    files, own, combined = {}, [], []
    for t in r.subset.slice_tables:
        majority = next(out for out, src, agg in t.columns if src == "majority_present" and agg == "mean")
        unanimous = next(out for out, src, agg in t.columns if src == "all_agree_binary" and agg == "mean")
        file = f"agreement_by_{t.key}.png"
        files[f"{name}/{file}"] = slice_agreement(r.tables[t.file], t.key, majority, unanimous,
                                                  f"{name}: agreement by {t.key.replace('_', ' ')}")
        own.append((f"Agreement by {t.key.replace('_', ' ')}", file))
        combined.append((f"{name}: agreement by {t.key.replace('_', ' ')}", f"{name}/{file}"))
    return files, own, combined


def coverage_figure(coverage: list[dict]) -> tuple[dict[str, bytes], list]:
    """The rater coverage across subsets (``[{"subset", "rater_coverage"}]``) and its report link."""
    return {"rater_coverage.png": rater_coverage(coverage)}, [("Rater coverage", "rater_coverage.png")]


def ceiling_figure(summaries: list[dict]) -> tuple[dict[str, bytes], list]:
    """The human ceiling across subsets (their summaries) and its report link."""
    return {"human_ceiling.png": human_ceiling(summaries)}, [("Human ceiling", "human_ceiling.png")]


def analysis_links(overview: list[tuple[dict, list]], per_subset: list[tuple[str, tuple[dict, list, list]]]) -> tuple[dict, dict]:
    """All of analysis_outputs/'s PNG files, and the links: links["report"] for the combined
    report (the figures across subsets first, then each subset's charts), links[<subset>] for
    that subset's own report (relative to it)."""
    files, report = {}, []
    for overview_files, overview_links in overview:
        files.update(overview_files)
        report += overview_links
    links = {}
    for name, (subset_files, own, combined) in per_subset:
        files.update(subset_files)
        links[name] = own
        report += combined
    links["report"] = report
    return files, links


def analysis_figures(results) -> tuple[dict[str, bytes], dict]:
    """Every PNG of analysis_outputs/ for the subsets' results (:class:`analysis.SubsetAnalysis`)
    and the reports' links (:func:`analysis_links`)."""
    overview = [coverage_figure([r.summary for r in results]), ceiling_figure([r.summary for r in results])]
    per_subset = [(r.subset.name, subset_agreement_figures(r)) for r in results]
    return analysis_links(overview, per_subset)


def benchmark_figures(result, scored_truth: np.ndarray, scored_scores: np.ndarray) -> tuple[dict[str, bytes], list]:
    """PNG files for benchmark_outputs/<subset>/ and the links its report embeds."""
    s, subset = result.summary, result.subset
    overall = {**s["overall"], "slice": "overall"}
    unanimous = {**s["unanimous_subset"], "slice": "unanimous"}
    records = []
    # buckets are left out: each holds one class of truth by construction, so BA is undefined there
    for r in (overall, unanimous, *s[f"by_{subset.type_slice}"]):
        ci = r.get("balanced_accuracy_ci95")
        lo = r.get("balanced_accuracy_ci_low", ci[0] if ci else None)
        hi = r.get("balanced_accuracy_ci_high", ci[1] if ci else None)
        label = r.get("slice") or r.get(subset.type_slice) or r.get("benchmark_bucket")
        records.append({"slice": label, "balanced_accuracy": r["balanced_accuracy"], "balanced_accuracy_ci_low": lo,
                        "balanced_accuracy_ci_high": hi, "n_positive": r.get("n_positive"),
                        "n_negative": r.get("n_negative")})
    cat = subset.category_slice
    files = {
        "balanced_accuracy_by_slice.png": slice_balanced_accuracy(records, "slice", s, f"{subset.name}: balanced accuracy by slice"),
        f"balanced_accuracy_by_{cat}.png": slice_balanced_accuracy(s[f"by_{cat}"], cat, s,
                                                                   f"{subset.name}: balanced accuracy by {cat.replace('_', ' ')}"),
        "roc.png": roc_curve(scored_truth, scored_scores, s["overall"]["auroc"], f"{subset.name}: ROC"),
        "threshold.png": threshold_curve(scored_truth, scored_scores, s["threshold"], s["best_threshold"],
                                         f"{subset.name}: balanced accuracy against threshold"),
    }
    links = [("Balanced accuracy by slice", "balanced_accuracy_by_slice.png"),
             (f"Balanced accuracy by {cat.replace('_', ' ')}", f"balanced_accuracy_by_{cat}.png"),
             ("ROC curve", "roc.png"), ("Balanced accuracy against threshold", "threshold.png")]
    if "calibration.csv" in result.tables:
        files["reliability.png"] = reliability_diagram(result.tables["calibration.csv"], f"{subset.name}: reliability")
        links.append(("Reliability diagram (the model's probability against the votes)", "reliability.png"))
    return files, links
