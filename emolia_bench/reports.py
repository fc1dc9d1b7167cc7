"""Markdown reports. Every number in them is computed from the data passed in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from .agreement import PRESELECT_RATER

LANDIS_KOCH = (
    (None, 0.0, "poor (below chance)"),
    (0.0, 0.2, "slight"),
    (0.2, 0.4, "fair"),
    (0.4, 0.6, "moderate"),
    (0.6, 0.8, "substantial"),
    (0.8, 1.0, "almost perfect"),
)


def fmt(x, digits: int = 3) -> str:
    """3 decimals for fractions, plain integers for counts, ``n/a`` for undefined."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating)):
        if float(x).is_integer() and abs(x) >= 2:
            return f"{int(x):,}"
        return f"{float(x):.{digits}f}"
    return str(x)


def fmt_ci(ci) -> str:
    return "n/a" if not ci else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def md_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(v) if not isinstance(v, str) else v.replace("|", "\\|") for v in r) + " |")
    return "\n".join(lines) + "\n"


def df_table(df: pd.DataFrame) -> str:
    if len(df) == 0:
        return "_(none)_\n"
    return md_table(list(df.columns), df.itertuples(index=False, name=None))


def kappa_band(k) -> str:
    if k is None:
        return "n/a"
    for lo, hi, name in LANDIS_KOCH:
        if (lo is None or k >= lo) and k < hi:
            return name
    return "almost perfect"


def landis_koch_table() -> str:
    rows = [("< 0.00" if lo is None else f"{lo:.2f}–{hi:.2f}", name) for lo, hi, name in LANDIS_KOCH]
    return md_table(["κ", "agreement (Landis & Koch 1977)"], rows)


# ---------------------------------------------------------------------------------------------
# analysis reports


def sampling_sentence(a) -> str:
    s = a.subset
    pos, neg = s.target_words
    others = sorted(set(s.categories.get(s.prior_column, ())) - set(s.prior_positive))
    return (
        f"Items were sampled by design: those with `{s.prior_column}` = "
        f"{', '.join(f'`{v}`' for v in s.prior_positive)} were chosen expecting **{pos}**, those with "
        f"{', '.join(f'`{v}`' for v in others) or 'any other value'} expecting **{neg}**. "
        f"The `{PRESELECT_RATER}` rater below is this sampling prior written as a vote on every item "
        f"with ≥2 human raters: it is derived from the sampling design, not from any model's output."
    )


def demographics(users: pd.DataFrame) -> str:
    out = []
    for col, title in (("age", "Age"), ("gender", "Gender"), ("languages", "Languages"),
                       ("listening_setup", "Listening setup"), ("expertise", "Expertise")):
        if col not in users.columns:
            continue
        if col == "age":
            ages = pd.to_numeric(users[col], errors="coerce").dropna()
            text = (f"{fmt(float(ages.min()))}–{fmt(float(ages.max()))} (mean {ages.mean():.1f})" if len(ages) else "n/a")
            out.append(f"- **{title}**: {text}")
            continue
        values = users[col].str.split(",").explode().str.strip() if col == "languages" else users[col].str.strip()
        counts = values[values != ""].value_counts()
        counts = counts.sort_index().sort_values(ascending=False, kind="stable")
        out.append(f"- **{title}**: " + (", ".join(f"{k} ({v})" for k, v in counts.items()) or "n/a"))
    return "\n".join(out) + "\n"


def figure_block(links) -> str:
    if not links:
        return ""
    return "\n".join(f"![{title}]({path})" for title, path in links) + "\n"


def subset_section(a, level: int = 2, figures=None) -> str:
    """The per-subset part of the analysis report (also written on its own)."""
    s, sm = a.subset, a.summary
    h = "#" * level
    ag, aug = sm["agreement"], sm["augmented_agreement"]
    pos, _ = s.target_words
    parts = [f"{h} {s.name}\n"]
    coverage = ", ".join(f"{n} rater{'s' if n != '1' else ''}: {c:,}" for n, c in sm["rater_coverage"].items())
    parts.append(
        f"{sm['rows_raw']:,} annotation rows read, {sm['rows_deduplicated']:,} after keeping each rater's "
        f"latest vote per item, over {sm['items_total']:,} items from {len(sm['annotators'])} annotators. "
        f"{sm['items_complete']:,} items have exactly 3 raters (complete), {sm['items_incomplete']:,} do not. "
        f"Rater coverage — {coverage}.\n"
    )
    if "items_flagged" in sm:
        parts.append(f"{sm['items_flagged']:,} labelled items are flagged as broken by an annotator; "
                     f"{len(sm.get('flags_unmatched', [])):,} flags name an item nobody rated.\n")
    parts.append(f"{h}# Sampling\n\n{sampling_sentence(a)} The human majority agrees with the sampling "
                 f"prior on {pct(sm[s.prior_match_rate_key])} of items; {pct(sm[s.positive_rate_key])} of items have a "
                 f"{pos} majority.\n")

    rows = [("exact agreement, complete items (binary)", ag.get("exact_3way_binary"))]
    if s.ordinal:
        rows.append(("exact agreement, complete items (ordinal)", ag.get("exact_3way_ordinal")))
    rows += [("pairwise exact agreement (binary)", ag.get("pairwise_exact_binary"))]
    if s.ordinal:
        rows.append(("pairwise exact agreement (ordinal)", ag.get("pairwise_exact_ordinal")))
    rows.append(("mean pairwise Cohen's κ (binary)", ag["pairwise_binary_kappa"]["mean"]))
    if s.ordinal:
        rows.append(("mean pairwise Cohen's κ (ordinal)", ag["pairwise_ordinal_kappa"]["mean"]))
    rows.append(("Fleiss' κ, complete items (binary)", ag.get("fleiss_binary_kappa")))
    if s.ordinal:
        rows.append(("Fleiss' κ, complete items (ordinal)", ag.get("fleiss_ordinal_kappa")))
    rows.append(("Krippendorff's α, items with ≥2 raters (binary)", ag.get("krippendorff_alpha_binary")))
    if s.ordinal:
        rows.append(("Krippendorff's α, items with ≥2 raters (ordinal)", ag.get("krippendorff_alpha_ordinal")))
    parts.append(f"{h}# Agreement\n\n" + md_table(["statistic", "value"], [(n, v) for n, v in rows]))
    kappas = [(k.replace("__", " – "), v, kappa_band(v)) for k, v in ag["pairwise_binary_kappa"].items() if k != "mean"]
    if kappas:
        parts.append("\nCohen's κ per rater pair (binary, complete items both rated):\n\n"
                     + md_table(["pair", "κ", "band"], kappas))

    parts.append(f"\n{h}# Human upper bound\n\n" + md_table(
        ["panel", "items", "pairwise acc", "95 % CI", "pairwise bal. acc", "LOO acc", "95 % CI", "LOO bal. acc", "LOO n"],
        [
            ("humans only", sm["items_total"], ag["human_pairwise_accuracy"], fmt_ci(ag.get("human_pairwise_accuracy_ci95")),
             ag["human_pairwise_balanced_accuracy"], ag["human_loo_accuracy"], fmt_ci(ag.get("human_loo_accuracy_ci95")),
             ag["human_loo_balanced_accuracy"], ag["human_loo_n_annotations"]),
            ("humans + sampling prior", aug["preselection_n_eligible_items"], aug["preselection_pairwise_accuracy"], "",
             aug["preselection_pairwise_balanced_accuracy"], aug["preselection_loo_accuracy"], "",
             aug["preselection_loo_balanced_accuracy"], aug["preselection_loo_n_annotations"]),
        ],
    ))
    b = sm.get("bootstrap", {})
    parts.append(f"\nIntervals: {b.get('draws')} bootstrap resamples of items (seed {b.get('seed')}), percentile method.\n")

    for t in s.slice_tables:
        parts.append(f"\n{h}# Per {t.key.replace('_', ' ')}\n\n" + df_table(a.tables[t.file]))
    for key, _, rows_sel in s.summary_tables:
        if rows_sel != "all":
            parts.append(f"\n{h}# {key.replace('_', ' ').capitalize()} (5)\n\n" + df_table(pd.DataFrame(sm[key])))
    if a.flags is not None and len(a.flags):
        keys = list(s.item_key)
        flagged = a.flags[[*keys, "reason", "username"]].copy()
        labelled = pd.MultiIndex.from_frame(a.labels[keys])
        flagged["labelled"] = pd.MultiIndex.from_frame(flagged[keys]).isin(labelled)
        parts.append(f"\n{h}# Flagged items\n\n" + df_table(flagged))
    if figures:
        parts.append(f"\n{h}# Figures\n\n" + figure_block(figures))
    parts.append(f"\n{h}# Annotators\n\n" + demographics(a.users))
    return "\n".join(parts)


def analysis_report(results: list, title: str = "emolia-bench — human agreement analysis", figures=None) -> str:
    parts = [f"# {title}\n"]
    if figures:
        parts.append(figure_block(figures[:2]))
    parts.append("## Headline: agreement of the panel augmented with the sampling prior\n\n" + md_table(
        ["subset", "eligible items", "pairwise acc", "pairwise bal. acc", "LOO acc", "LOO bal. acc", "LOO n"],
        [(a.subset.name, a.summary["augmented_agreement"]["preselection_n_eligible_items"],
          a.summary["augmented_agreement"]["preselection_pairwise_accuracy"],
          a.summary["augmented_agreement"]["preselection_pairwise_balanced_accuracy"],
          a.summary["augmented_agreement"]["preselection_loo_accuracy"],
          a.summary["augmented_agreement"]["preselection_loo_balanced_accuracy"],
          a.summary["augmented_agreement"]["preselection_loo_n_annotations"]) for a in results],
    ))
    parts.append(
        f"\nThe augmented panel adds one synthetic rater, `{PRESELECT_RATER}`, whose vote on each item with ≥2 "
        "human raters is the sampling prior (what the item was sampled to be). It is derived from the "
        "sampling design, not from any model's output.\n"
    )
    parts.append("## How the sampling prior matches the human consensus\n\n" + md_table(
        ["subset", "items (majority not tied)", "accuracy", "balanced accuracy"],
        [(a.subset.name, a.summary["augmented_agreement"]["gemini_vs_human_consensus_n_items"],
          a.summary["augmented_agreement"]["gemini_vs_human_consensus_accuracy"],
          a.summary["augmented_agreement"]["gemini_vs_human_consensus_balanced_accuracy"]) for a in results],
    ))
    parts.append("\n## Humans-only ceiling\n\n" + md_table(
        ["subset", "pairwise exact (complete items)", "pairwise acc", "95 % CI", "pairwise bal. acc", "LOO acc", "95 % CI",
         "LOO bal. acc", "LOO n"],
        [(a.subset.name, a.summary["agreement"]["pairwise_exact_binary"], a.summary["agreement"]["human_pairwise_accuracy"],
          fmt_ci(a.summary["agreement"].get("human_pairwise_accuracy_ci95")),
          a.summary["agreement"]["human_pairwise_balanced_accuracy"], a.summary["agreement"]["human_loo_accuracy"],
          fmt_ci(a.summary["agreement"].get("human_loo_accuracy_ci95")),
          a.summary["agreement"]["human_loo_balanced_accuracy"], a.summary["agreement"]["human_loo_n_annotations"])
         for a in results],
    ))
    parts.append("\n## Quick stats\n\n" + md_table(
        ["subset", "annotators", "complete items", "annotations", "majority-positive rate", "mean pairwise κ (binary)",
         "Fleiss κ (binary)"],
        [(a.subset.name, len(a.summary["annotators"]), a.summary["items_complete"], a.summary["rows_deduplicated"],
          a.summary[a.subset.positive_rate_key], a.summary["agreement"]["pairwise_binary_kappa"]["mean"],
          a.summary["agreement"]["fleiss_binary_kappa"]) for a in results],
    ))
    for a in results:
        own = [(t, p) for t, p in (figures or [])[2:] if p.startswith(a.subset.name + "/")]
        parts.append("\n" + subset_section(a, level=2, figures=own))
    parts.append("\n## Reading κ\n\n" + landis_koch_table())
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# benchmark report


def score_rubric(s: dict) -> str:
    from .metrics import BANDS

    rows = [("primary metric", "balanced accuracy (mean of recall on present and on absent)"),
            ("chance", fmt(0.5)),
            ("majority baseline (always the more common answer)", fmt(s["majority_baseline"])),
            ("human pairwise accuracy (ceiling)", fmt(s.get("human_accuracy_binary"))),
            ("human pairwise balanced accuracy", fmt(s.get("human_balanced_accuracy_binary"))),
            ("human leave-one-out accuracy", fmt(s.get("human_loo_accuracy_binary"))),
            ("human leave-one-out balanced accuracy", fmt(s.get("human_loo_balanced_accuracy_binary")))]
    lo = 0.0
    bands = []
    for limit, name in BANDS:
        bands.append((name, f"{fmt(lo)} – {fmt(limit) if limit != float('inf') else '1.000'}"))
        lo = limit
    return ("## Score rubric\n\n" + md_table(["reference", "value"], rows) + "\n"
            + md_table(["band", "balanced accuracy"], bands))


def _metric_rows(m: dict) -> list:
    ci = m.get("balanced_accuracy_ci95")
    return [("n", m["n"]), ("balanced accuracy", m["balanced_accuracy"]), ("95 % CI (clip bootstrap)", fmt_ci(ci)),
            ("band", m.get("band", "n/a")), ("accuracy", m["accuracy"]), ("precision", m["precision"]),
            ("recall", m["recall"]), ("specificity", m.get("specificity")), ("F1", m["f1"]),
            ("AUROC", m.get("auroc")), ("average precision", m.get("average_precision")),
            ("tp / fp / tn / fn", f"{fmt(m['tp'])} / {fmt(m['fp'])} / {fmt(m['tn'])} / {fmt(m['fn'])}")]


def _slice_table(records: list, key: str) -> str:
    return md_table([key, "n", "balanced accuracy", "95 % CI", "accuracy", "F1", "AUROC"],
                    [(r[key], r["n"], r["balanced_accuracy"],
                      fmt_ci(None if r.get("balanced_accuracy_ci_low") is None else [r["balanced_accuracy_ci_low"], r["balanced_accuracy_ci_high"]]),
                      r["accuracy"], r["f1"], r.get("auroc")) for r in records])


def benchmark_report(r, figures=None) -> str:
    s, subset = r.summary, r.subset
    sim = s["similarity"]
    fs = s["filter_stats"]
    parts = [f"# {subset.name} — benchmark report\n", score_rubric(s)]
    endpoint = s["endpoint"] if isinstance(s["endpoint"], (str, type(None))) else ", ".join(s["endpoint"])
    parts.append(
        "## Run\n\n"
        f"- mode: `{s['mode']}`" + (f" (endpoint {endpoint})" if endpoint else "") + "\n"
        f"- filter: {s['filter_mode']} — {fs['input']:,} labelled items, {fs['dropped_below_min_raters']:,} below the "
        f"minimum raters, {fs['dropped_flagged']:,} flagged, {fs['dropped_non_unanimous']:,} not unanimous, "
        f"{fs['kept']:,} kept\n"
        f"- rows: {s['rows_total']:,} scored rows, {s['rows_evaluated_ok']:,} ok, {s['missing_audio']:,} without audio, "
        f"{s['evaluation_errors']:,} scoring errors\n"
        f"- threshold: present iff similarity ≥ {s['threshold']:g}\n"
        f"- similarity: min {fmt(sim['min'])}, median {fmt(sim['median'])}, max {fmt(sim['max'])}\n"
    )
    parts.append(f"## Headline — {s['filter_mode']}\n\n" + md_table(["metric", "value"], _metric_rows(s["overall"])))
    parts.append("## Unanimous items only\n\n" + md_table(["metric", "value"], _metric_rows(s["unanimous_subset"])))
    parts.append(f"## By {subset.type_slice.replace('_', ' ')}\n\n" + _slice_table(s[f"by_{subset.type_slice}"], subset.type_slice))
    parts.append("## By benchmark bucket\n\n" + _slice_table(s["by_benchmark_bucket"], "benchmark_bucket"))
    parts.append(f"## By {subset.category_slice.replace('_', ' ')}\n\n"
                 + _slice_table(s[f"by_{subset.category_slice}"], subset.category_slice))
    b = s["bootstrap"]
    parts.append(f"Intervals: {b['draws']} bootstrap resamples of clips (all rows of a clip together), seed {b['seed']}.\n")
    bt = s.get("best_threshold") or {}
    if bt.get("threshold") is not None:
        parts.append(f"For reference only (never used for the numbers above): the threshold with the highest balanced "
                     f"accuracy on these rows would be {bt['threshold']:.4f}, giving {bt['balanced_accuracy']:.3f}; "
                     f"choosing it on the test rows would overstate the model.\n")
    if figures:
        parts.append("## Figures\n\n" + figure_block(figures))
    parts.append(score_rubric(s))
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# comparison report


def comparison_report(board: pd.DataFrame, pairs: pd.DataFrame, draws: int, seed: int, figure: str | None) -> str:
    parts = ["# emolia-bench — comparison of runs\n"]
    if figure:
        parts.append(f"![Balanced accuracy, overall]({figure})\n")
    overall = board[board["slice"] == "overall"]
    parts.append("## Leaderboard\n\n" + md_table(
        ["subset", "run", "n", "balanced accuracy", "95 % CI", "threshold", "mode"],
        [(r.subset, r.run, r.n, r.balanced_accuracy, fmt_ci(None if pd.isna(r.ci_low) else [r.ci_low, r.ci_high]),
          r.threshold, r.mode) for r in overall.itertuples()]))
    parts.append("## Paired tests\n\nΔ = balanced accuracy of B minus A on the rows both scored; interval and p from a "
                 f"paired bootstrap over clips ({draws} draws, seed {seed}); McNemar's exact test on per-row "
                 "correctness (b: A right and B wrong, c: B right and A wrong).\n\n" + md_table(
                     ["subset", "A", "B", "rows", "Δ", "95 % CI", "p (bootstrap)", "b", "c", "p (McNemar)"],
                     [(r.subset, r.run_a, r.run_b, r.rows, r.difference,
                       fmt_ci(None if pd.isna(r.difference_ci_low) else [r.difference_ci_low, r.difference_ci_high]),
                       r.p_bootstrap, r.a_right_b_wrong, r.b_right_a_wrong, r.p_mcnemar) for r in pairs.itertuples()]))
    rest = board[board["slice"] != "overall"]
    parts.append("## By slice\n\n" + md_table(
        ["subset", "slice", "run", "n", "balanced accuracy", "95 % CI"],
        [(r.subset, r.slice, r.run, r.n, None if pd.isna(r.balanced_accuracy) else r.balanced_accuracy,
          fmt_ci(None if pd.isna(r.ci_low) else [r.ci_low, r.ci_high])) for r in rest.itertuples()]))
    return "\n".join(parts)
