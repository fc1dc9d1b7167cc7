"""Markdown reports. Every number in them is computed from the data passed in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from .agreement import PRESELECT_RATER
from .compare import ONE_CLASS_SHARE
from .rater_models import MODELS

LANDIS_KOCH = (
    (None, 0.0, "poor (below chance)"),
    (0.0, 0.2, "slight"),
    (0.2, 0.4, "fair"),
    (0.4, 0.6, "moderate"),
    (0.6, 0.8, "substantial"),
    (0.8, 1.0, "almost perfect"),
)


# ---------------------------------------------------------------------------------------------
# cells: formatted by what their column holds, never guessed from the value
#
# Every table declares its columns as (title, kind). A count is printed as an integer whatever
# its type (upstream stores counts as floats, ``"n": 8.0``); a fraction with 3 decimals, even
# when it is exactly 1.0 or 2.0; a signed statistic (κ, α, a difference) with its sign; a
# threshold with 4 decimals; undefined values as n/a.

COUNT, FRACTION, SIGNED, THRESHOLD, P_VALUE, INTERVAL, TEXT = (
    "count", "fraction", "signed", "threshold", "p_value", "interval", "text")


def _undefined(x) -> bool:
    return x is None or x is pd.NA or (isinstance(x, (float, np.floating)) and not np.isfinite(x))


def count(x) -> str:
    """An integer with thousands separators (3.0 -> ``3``)."""
    return "n/a" if _undefined(x) else f"{int(round(float(x))):,}"


def fraction(x) -> str:
    return "n/a" if _undefined(x) else f"{float(x):.3f}"


def signed(x) -> str:
    return "n/a" if _undefined(x) else f"{float(x):+.3f}"


def threshold(x) -> str:
    return "n/a" if _undefined(x) else f"{float(x):.4f}"


def p_value(x) -> str:
    if _undefined(x):
        return "n/a"
    return "< 0.001" if x < 0.001 else f"{float(x):.3f}"


def interval(ci, fmt=fraction) -> str:
    """``[low, high]`` of a two-value interval (each end as ``fmt`` prints it); n/a when absent."""
    return "n/a" if not ci or _undefined(ci[0]) else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def text(x) -> str:
    if _undefined(x):
        return "n/a"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    return str(x).replace("|", "\\|")


FORMATS = {COUNT: count, FRACTION: fraction, SIGNED: signed, THRESHOLD: threshold, P_VALUE: p_value,
           INTERVAL: interval, TEXT: text}


def cell(value, kind: str) -> str:
    return FORMATS[kind](value)


def value_ci(f: dict, fmt=fraction) -> str:
    """A ``{"value", "ci95"}`` figure as ``value [low, high]``."""
    return f"{fmt(f['value'])} {interval(f['ci95'], fmt)}"


def pct(x) -> str:
    return "n/a" if _undefined(x) else f"{100 * x:.1f} %"


def md_table(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence]) -> str:
    """A Markdown table; ``columns`` are ``(title, kind)`` and each cell is formatted by its
    column's kind (:data:`FORMATS`)."""
    formats = [FORMATS[kind] for _, kind in columns]
    lines = ["| " + " | ".join(title for title, _ in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        cells = list(r)
        if len(cells) != len(formats):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(formats)} columns")
        lines.append("| " + " | ".join(f(v) for f, v in zip(formats, cells, strict=True)) + " |")
    return "\n".join(lines) + "\n"


def df_table(df: pd.DataFrame, kinds: dict[str, str]) -> str:
    """``df`` as a Markdown table; ``kinds`` names the kind of every column."""
    if len(df) == 0:
        return "_(none)_\n"
    return md_table([(c, kinds[c]) for c in df.columns], df.itertuples(index=False, name=None))


def slice_table_kinds(table) -> dict[str, str]:
    """Column kinds of an analysis slice table (:class:`subsets.SliceTable`), from how each
    column is aggregated: item counts, rates (means of 0/1), carried values."""
    by_aggregation = {"count": COUNT, "mean": FRACTION, "first": TEXT}
    return {table.key: TEXT, **{name: by_aggregation[agg] for name, _, agg in table.columns}}


# ---------------------------------------------------------------------------------------------
# agreement figures with their support (summary.json["agreement_detail"])

FIGURE_LABELS = {
    "exact_3way_binary": "exact agreement of all raters of a complete item (binary)",
    "exact_3way_ordinal": "exact agreement of all raters of a complete item (ordinal)",
    "pairwise_exact_binary": "pairwise exact agreement (binary)",
    "pairwise_exact_ordinal": "pairwise exact agreement (ordinal)",
    "pairwise_binary_kappa_mean": "mean pairwise Cohen's κ (binary)",
    "pairwise_binary_kappa_mean_items_weighted": "pairwise Cohen's κ (binary), pairs weighted by shared items",
    "pairwise_ordinal_kappa_mean": "mean pairwise Cohen's κ (ordinal, unweighted)",
    "pairwise_ordinal_kappa_mean_items_weighted": "pairwise Cohen's κ (ordinal, unweighted), pairs weighted by shared items",
    "pairwise_ordinal_kappa_quadratic_mean": "mean pairwise Cohen's κ (ordinal, quadratic weights)",
    "pairwise_ordinal_kappa_quadratic_mean_items_weighted": "pairwise Cohen's κ (ordinal, quadratic weights), pairs weighted by shared items",
    "fleiss_binary_kappa": "Fleiss' κ (binary)",
    "fleiss_ordinal_kappa": "Fleiss' κ (ordinal)",
    "krippendorff_alpha_binary": "Krippendorff's α (binary)",
    "krippendorff_alpha_ordinal": "Krippendorff's α (ordinal)",
    "human_pairwise_accuracy": "human pairwise accuracy (mean over rater pairs, upstream's figure)",
    "human_pairwise_accuracy_items_weighted": "human pairwise accuracy, pairs weighted by shared items",
    "human_pairwise_balanced_accuracy": "human pairwise balanced accuracy",
    "human_loo_accuracy": "human leave-one-out accuracy",
    "human_loo_balanced_accuracy": "human leave-one-out balanced accuracy",
}
# chance-corrected figures are signed (below 0: worse than chance); the others are shares
SIGNED_FIGURES = {"pairwise_binary_kappa_mean", "pairwise_binary_kappa_mean_items_weighted", "pairwise_ordinal_kappa_mean",
                  "pairwise_ordinal_kappa_mean_items_weighted", "pairwise_ordinal_kappa_quadratic_mean",
                  "pairwise_ordinal_kappa_quadratic_mean_items_weighted", "fleiss_binary_kappa", "fleiss_ordinal_kappa",
                  "krippendorff_alpha_binary", "krippendorff_alpha_ordinal"}
FIGURE_COLUMNS = [("statistic", TEXT), ("value", TEXT), ("95 % CI", TEXT), ("items", COUNT), ("comparisons", COUNT)]


def too_few(fig: dict, min_items: int) -> str:
    """The sentence that replaces a figure resting on too few items (or, for an unweighted mean
    over rater pairs, a pair sharing too few)."""
    if fig.get("min_pair_items") is not None and fig["n_items"] >= min_items:
        return (f"a rater pair shares only {fig['min_pair_items']:,} items, and this unweighted mean over pairs "
                f"weighs it as much as the others (at least {min_items:,} needed); read the items-weighted figure; "
                "its value is in summary.json, marked \"reliable\": false")
    return (f"{fig['n_items']:,} {fig['unit']}: too few for this figure (at least {min_items:,} needed); "
            "its value is in summary.json, marked \"reliable\": false")


def figure_table(detail: dict, names: list[str]) -> str:
    """The figures ``names`` of ``agreement_detail``: reliable ones as rows (value, interval,
    items, comparisons); the others as sentences below the table, with no number."""
    rows, notes = [], []
    for name in names:
        fig = detail["figures"].get(name)
        if fig is None:
            continue
        fmt = signed if name in SIGNED_FIGURES else fraction
        if fig["reliable"]:
            rows.append((FIGURE_LABELS[name], fmt(fig["value"]), interval(fig["ci95"], fmt), fig["n_items"],
                         fig["n_comparisons"]))
        else:
            notes.append(f"- {FIGURE_LABELS[name]}: {too_few(fig, detail['min_items'])}.")
    table = md_table(FIGURE_COLUMNS, rows) if rows else ""
    return table + ("\n" + "\n".join(notes) + "\n" if notes else "")


def reliable_value(fig: dict | None, fmt=fraction) -> str:
    """A figure's value for a table cell, or why it is not shown."""
    if fig is None:
        return "n/a"
    return fmt(fig["value"]) if fig["reliable"] else f"too few items ({fig['n_items']:,})"


# the human ceiling, one row per panel
CEILING_COLUMNS = [("panel", TEXT), ("items", COUNT), ("pairwise acc", FRACTION), ("95 % CI", INTERVAL),
                   ("pairwise bal. acc", FRACTION), ("LOO acc", FRACTION), ("95 % CI", INTERVAL),
                   ("LOO bal. acc", FRACTION), ("LOO n", COUNT)]


def kappa_band(k) -> str:
    if k is None:
        return "n/a"
    for lo, hi, name in LANDIS_KOCH:
        if (lo is None or k >= lo) and k < hi:
            return name
    return "almost perfect"


def landis_koch_table() -> str:
    rows = [("< 0.00" if lo is None else f"{lo:.2f}–{hi:.2f}", name) for lo, hi, name in LANDIS_KOCH]
    return md_table([("κ", TEXT), ("agreement (Landis & Koch 1977)", TEXT)], rows)


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
            span = f"{count(ages.min())}–{count(ages.max())} (mean {ages.mean():.1f})" if len(ages) else "n/a"
            out.append(f"- **{title}**: {span}")
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


def agreement_sections(a, h: str) -> str:
    """Humans-only agreement (every figure with its interval and support), the ceiling, the
    per-pair κ, agreement within each slice and the rater profiles; then the panel augmented
    with the sampling prior, named as upstream's figure."""
    s, sm = a.subset, a.summary
    aug, detail = sm["augmented_agreement"], sm["agreement_detail"]
    ordinal = s.ordinal
    names = ["exact_3way_binary", "pairwise_exact_binary", "pairwise_binary_kappa_mean",
             "pairwise_binary_kappa_mean_items_weighted", "fleiss_binary_kappa", "krippendorff_alpha_binary"]
    if ordinal:
        names += ["exact_3way_ordinal", "pairwise_exact_ordinal", "pairwise_ordinal_kappa_mean",
                  "pairwise_ordinal_kappa_quadratic_mean", "fleiss_ordinal_kappa", "krippendorff_alpha_ordinal"]
    b = sm.get("bootstrap", {})
    parts = [f"{h}# Agreement among the human raters\n\n"
             f"Intervals: {b.get('draws')} bootstrap resamples of items (seed {b.get('seed')}), percentile method; "
             "raters are held fixed, so every interval is conditional on these raters. A figure resting on fewer "
             f"than {detail['min_items']:,} items is not shown as a number.\n\n" + figure_table(detail, names)]
    pair_rows = detail.get("pair_kappas", [])
    if pair_rows:
        columns = [("pair", TEXT), ("items", COUNT), ("κ (binary)", SIGNED), ("band", TEXT)]
        if ordinal:
            columns += [("κ (ordinal)", SIGNED), ("κ (ordinal, quadratic)", SIGNED)]
        columns = [(title, TEXT if kind == SIGNED else kind) for title, kind in columns]
        rows = []
        for r in pair_rows:
            ok = r["reliable"]
            shown = [signed(r[k]) if ok else f"too few items ({r['n_items']:,})"
                     for k in ("kappa_binary", *(("kappa_ordinal", "kappa_ordinal_quadratic") if ordinal else ()))]
            rows.append((r["pair"].replace("__", " – "), r["n_items"], shown[0], kappa_band(r["kappa_binary"]) if ok else "",
                         *shown[1:]))
        parts.append("\nCohen's κ per rater pair, on the complete items that both rated:\n\n"
                     + md_table(columns, rows))

    parts.append(f"\n{h}# Human upper bound\n\n" + figure_table(detail, [
        "human_pairwise_accuracy", "human_pairwise_accuracy_items_weighted", "human_pairwise_balanced_accuracy",
        "human_loo_accuracy", "human_loo_balanced_accuracy"]))

    by = sm.get(f"agreement_by_{s.type_slice}", [])
    if by:
        columns = [(s.type_slice, TEXT), ("items (≥2 raters)", COUNT), ("α (binary)", TEXT), ("95 % CI", TEXT)]
        if ordinal:
            columns += [("α (ordinal)", TEXT), ("95 % CI", TEXT)]
        columns += [("items (3 raters)", COUNT), ("exact agreement (binary)", TEXT)]
        rows = []
        for r in by:
            ok = r["reliable"]
            cells = [r["slice"], r["n_items_two_or_more_raters"], signed(r["alpha_binary"]) if ok else "too few items",
                     interval(r["alpha_binary_ci95"], signed) if ok else ""]
            if ordinal:
                cells += [signed(r["alpha_ordinal"]) if ok else "too few items",
                          interval(r["alpha_ordinal_ci95"], signed) if ok else ""]
            exact_ok = r["exact_agreement_reliable"]
            cells += [r["n_items_complete"], fraction(r["exact_agreement_binary"]) if exact_ok else "too few items"]
            rows.append(cells)
        parts.append(f"\n{h}# Agreement within each {s.type_slice.replace('_', ' ')}\n\n"
                     "Krippendorff's α within a slice says whether raters agree on *which* items of that kind "
                     "show the target; the overall α also counts agreement that comes only from the slices "
                     "differing from each other.\n\n" + md_table(columns, rows))

    parts.append(rater_section(a, h))
    parts.append(rater_model_section(a, h))

    parts.append(f"\n{h}# Upstream's figure: the panel with the sampling prior as a rater\n\n"
                 f"The panel below adds one synthetic rater, `{PRESELECT_RATER}`, who votes the sampling prior on "
                 "every item with ≥2 human raters. This is the upstream project's headline figure; it is not "
                 "agreement among humans (the prior agrees with the majority it helps to form), so read the "
                 "humans-only figures above for how far people agree.\n\n" + md_table(
                     CEILING_COLUMNS,
                     [("humans + sampling prior", aug["preselection_n_eligible_items"], aug["preselection_pairwise_accuracy"],
                       None, aug["preselection_pairwise_balanced_accuracy"], aug["preselection_loo_accuracy"], None,
                       aug["preselection_loo_balanced_accuracy"], aug["preselection_loo_n_annotations"])]))
    return "".join(parts)


RATER_COLUMNS = [("rater", TEXT), ("items", COUNT), ("present share", FRACTION), ("vs others' majority", TEXT),
                 ("comparisons", COUNT), ("median reaction ms", COUNT), ("under 1 s", FRACTION),
                 ("faster than the clip", FRACTION), ("pointed out", TEXT)]


def rater_section(a, h: str) -> str:
    """The rater profiles (raters.csv) in brief, with the rule that points raters out."""
    t, info = a.raters, a.summary.get("raters", {})
    if len(t) == 0:
        return ""
    from .raters import MIN_COMPARISONS

    rows = [(r["rater"], r["items_rated"], r["share_present"],
             fraction(r["agreement_with_others_majority"]) if r["loo_comparisons"] >= MIN_COMPARISONS else "too few",
             r["loo_comparisons"],
             r["median_reaction_time_ms"], r["share_under_1s"], r["share_faster_than_clip"],
             r["flag_reasons"] or "no") for r in t.to_dict(orient="records")]
    excluded = info.get("excluded") or []
    return (f"\n{h}# Raters\n\nOne row per rater (the full profile, with κ against each other rater, is "
            f"`raters.csv`). Rule: {info.get('flag_rule', '')}. Nothing is excluded automatically; re-run with "
            "`--exclude-raters` to see the figures without a rater."
            + (f" This run excluded: {', '.join(excluded)}." if excluded else "") + "\n\n" + md_table(RATER_COLUMNS, rows))


MODEL_TITLES = {"majority": "majority vote", "dawid_skene": "Dawid–Skene", "one_coin_dawid_skene": "one-coin Dawid–Skene",
                "mace": "MACE"}


def rater_model_section(a, h: str) -> str:
    """The latent-class rater models (summary.json["rater_models"], rater_models.csv)."""
    block = a.summary.get("rater_models") or {}
    if not block.get("dawid_skene"):
        return ""
    rows = [(MODEL_TITLES[k], text(block[k]["converged"]) if block[k]["converged"] is not None else "not checked",
             block[k]["iterations"], pct(block[k]["present_rate"]), block[k]["labels_differ_from_majority"])
            for k in MODELS if block.get(k)]
    raters = [(r["rater"], fraction(r.get("ds_sensitivity")), fraction(r.get("ds_specificity")),
               fraction(r.get("one_coin_skill")), fraction(r.get("mace_competence"))) for r in a.raters.to_dict(orient="records")]
    return (f"\n{h}# Rater models\n\nLatent-class models of the raters, fitted on the votes alone (crowd-kit): each "
            "item's posterior probability of present and label are in `rater_models.csv`. "
            f"{block['items_one_rater']:,} of {block['items']:,} items have one rater: their posterior rests on that "
            "rater's channel alone. A model that did not converge is said so; its labels are not a reference.\n\n"
            + md_table([("model", TEXT), ("converged", TEXT), ("iterations", COUNT), ("labelled present", TEXT),
                        (f"labels ≠ majority (of {block['items_with_a_majority']:,})", COUNT)], rows)
            + "\n\n" + md_table([("rater", TEXT), ("DS sensitivity", TEXT), ("DS specificity", TEXT),
                                  ("one-coin skill", TEXT), ("MACE competence", TEXT)], raters)
            + analysis_ceiling(block))


def analysis_ceiling(block: dict) -> str:
    """The noise ceiling and the reliability of the mean rating of the analysis run."""
    c, g = block.get("noise_ceiling"), block.get("mean_rating_reliability")
    if not c or not c.get("ceiling"):
        return ""
    fig = value_ci
    rows = [("ceiling: a scorer that knows each item's class", fig(c["ceiling"])),
            ("the votes' own predictor (from the other votes)", fig(c["votes_own_predictor"])),
            ("constant: always the commoner vote", fig(c["constant_predictor"])),
            ("humans: one rater's vote against another's", fig(c["humans"]["agreement_with_votes"]))]
    out = ("\n\n**The noise ceiling** — the best agreement any scorer can reach with a new vote, given these raters' "
           "noise (Dawid–Skene channels; README: rater models). The benchmark prints the model beside it.\n\n"
           + md_table([("predictor", TEXT), ("agreement with a new vote, 95 % CI (items)", TEXT)], rows))
    if g and g.get("reliability_of_mean"):
        out += (f"\nThe mean rating of an item ({g['raters_per_item']:.2f} ratings on average) is reliable to "
                f"{fig(g['reliability_of_mean'])} (Spearman–Brown from ICC(1) = {fig(g['icc1'])}): a correlation with "
                f"it cannot exceed about {fig(g['correlation_ceiling'])}.\n")
    return out


def subset_section(a, level: int = 2, figures=None) -> str:
    """The per-subset part of the analysis report (also written on its own)."""
    s, sm = a.subset, a.summary
    h = "#" * level
    pos, _ = s.target_words
    parts = [f"{h} {s.name}\n"]
    coverage = ", ".join(f"{n} rater{'s' if n != '1' else ''}: {c:,}" for n, c in sm["rater_coverage"].items())
    parts.append(
        f"{sm['rows_raw']:,} annotation rows read, {sm['rows_deduplicated']:,} after keeping each rater's "
        f"latest vote per item, over {sm['items_total']:,} items from {len(sm['raters_present'])} annotators. "
        f"{sm['items_complete']:,} items were rated by {sm['complete_item_raters']} raters (complete), "
        f"{sm['items_incomplete']:,} were not. "
        f"Rater coverage — {coverage}.\n"
    )
    if "majority_present_tie" in a.labels:
        one = int((a.labels["n_raters"] == 1).sum())
        tie = int(a.labels["majority_present_tie"].sum())
        parts.append(f"Of the {len(a.labels):,} labels, {one:,} rest on one rater's vote and {tie:,} on an even split of the "
                     "raters resolved to absent (upstream's tie rule); neither is a label several people agreed on.\n")
    if "items_flagged" in sm:
        parts.append(f"{sm['items_flagged']:,} labelled items are flagged as broken by an annotator; "
                     f"{len(sm.get('flags_unmatched', [])):,} flags name an item nobody rated.\n")
    parts.append(f"{h}# Sampling\n\n{sampling_sentence(a)} The human majority agrees with the sampling "
                 f"prior on {pct(sm[s.prior_match_rate_key])} of items; {pct(sm[s.positive_rate_key])} of items have a "
                 f"{pos} majority.\n")

    parts.append(agreement_sections(a, h))
    for t in s.slice_tables:
        parts.append(f"\n{h}# Per {t.key.replace('_', ' ')}\n\n" + df_table(a.tables[t.file], slice_table_kinds(t)))
    tables = {t.file: t for t in s.slice_tables}
    for key, file, rows_sel, heading, note in s.summary_tables:
        if rows_sel != "all":
            parts.append(f"\n{h}# {heading}\n\n{note}\n\n"
                         + df_table(pd.DataFrame(sm[key]), slice_table_kinds(tables[file])))
    if a.flags is not None and len(a.flags):
        keys = list(s.item_key)
        flagged = a.flags[[*keys, "reason", "username"]].copy()
        labelled = pd.MultiIndex.from_frame(a.labels[keys])
        flagged["labelled"] = pd.MultiIndex.from_frame(flagged[keys]).isin(labelled)
        parts.append(f"\n{h}# Flagged items\n\n" + df_table(flagged, {c: TEXT for c in flagged.columns}))
    if figures:
        parts.append(f"\n{h}# Figures\n\n" + figure_block(figures))
    parts.append(f"\n{h}# Annotators\n\n" + demographics(a.users))
    return "\n".join(parts)


def analysis_report(results: list, title: str = "emolia-bench — human agreement analysis", figures=None) -> str:
    parts = [f"# {title}\n"]
    if figures:
        parts.append(figure_block(figures[:2]))

    def fig(a, name, fmt=fraction):
        f = a.summary["agreement_detail"]["figures"].get(name)
        return reliable_value(f, fmt), (interval(f["ci95"], fmt) if f and f["reliable"] else "")

    rows = []
    for a in results:
        d = a.summary["agreement_detail"]["figures"]
        rows.append((a.subset.name, *fig(a, "human_pairwise_accuracy"), d["human_pairwise_accuracy"]["n_items"],
                     *fig(a, "human_loo_accuracy"), d["human_loo_accuracy"]["n_comparisons"],
                     *fig(a, "pairwise_binary_kappa_mean", signed), *fig(a, "fleiss_binary_kappa", signed),
                     *fig(a, "krippendorff_alpha_binary", signed)))
    parts.append("## Agreement among the human raters\n\n"
                 "Read these first: how far people agree with each other. Intervals resample items with the raters "
                 "held fixed (conditional on these raters); a figure resting on too few items is not shown as a "
                 "number (see each subset's section).\n\n" + md_table(
                     [("subset", TEXT), ("pairwise acc", TEXT), ("95 % CI", TEXT), ("items", COUNT), ("LOO acc", TEXT),
                      ("95 % CI", TEXT), ("LOO comparisons", COUNT), ("mean pairwise κ", TEXT), ("95 % CI", TEXT),
                      ("Fleiss' κ", TEXT), ("95 % CI", TEXT), ("Krippendorff's α", TEXT), ("95 % CI", TEXT)], rows))
    parts.append("\n## Quick stats\n\n" + md_table(
        [("subset", TEXT), ("annotators", COUNT), ("complete items", COUNT), ("annotations", COUNT),
         ("majority-positive rate", FRACTION), ("mean pairwise κ (binary)", TEXT), ("Fleiss κ (binary)", TEXT)],
        [(a.subset.name, len(a.summary["annotators"]), a.summary["items_complete"], a.summary["rows_deduplicated"],
          a.summary[a.subset.positive_rate_key], fig(a, "pairwise_binary_kappa_mean", signed)[0],
          fig(a, "fleiss_binary_kappa", signed)[0]) for a in results],
    ))
    parts.append("\n## Upstream's headline: the panel with the sampling prior as a rater\n\n"
                 f"The upstream project's headline adds one synthetic rater, `{PRESELECT_RATER}`, whose vote on each "
                 "item with ≥2 human raters is the sampling prior (what the item was sampled to be; derived from the "
                 "sampling design, not from any model's output). It is kept so upstream's figures reproduce; it is "
                 "not agreement among humans — the prior agrees with the majority it helps to form — so read the "
                 "humans-only table above.\n\n" + md_table(
                     [("subset", TEXT), ("eligible items", COUNT), ("pairwise acc", FRACTION), ("pairwise bal. acc", FRACTION),
                      ("LOO acc", FRACTION), ("LOO bal. acc", FRACTION), ("LOO n", COUNT), ("Fleiss' κ", SIGNED)],
                     [(a.subset.name, a.summary["augmented_agreement"]["preselection_n_eligible_items"],
                       a.summary["augmented_agreement"]["preselection_pairwise_accuracy"],
                       a.summary["augmented_agreement"]["preselection_pairwise_balanced_accuracy"],
                       a.summary["augmented_agreement"]["preselection_loo_accuracy"],
                       a.summary["augmented_agreement"]["preselection_loo_balanced_accuracy"],
                       a.summary["augmented_agreement"]["preselection_loo_n_annotations"],
                       a.summary["augmented_agreement"]["preselection_fleiss_kappa"]) for a in results]))
    parts.append("\n## How the sampling prior matches the human consensus\n\n" + md_table(
        [("subset", TEXT), ("items (majority not tied)", COUNT), ("accuracy", FRACTION), ("balanced accuracy", FRACTION)],
        [(a.subset.name, a.summary["augmented_agreement"]["gemini_vs_human_consensus_n_items"],
          a.summary["augmented_agreement"]["gemini_vs_human_consensus_accuracy"],
          a.summary["augmented_agreement"]["gemini_vs_human_consensus_balanced_accuracy"]) for a in results]))
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
            ("chance, and any constant predictor (always present or always absent)", fraction(0.5)),
            ("the sampling prior as a predictor (costs nothing)",
             fraction((s.get("sampling_prior_vs_majority") or {}).get("balanced_accuracy"))),
            *[(title, fraction(s.get(key)) if s.get("human_reliable", {}).get(key, True) else
               "too few items (analysis report)")
              for title, key in (("human pairwise accuracy (ceiling)", "human_accuracy_binary"),
                                 ("human pairwise balanced accuracy", "human_balanced_accuracy_binary"),
                                 ("human leave-one-out accuracy", "human_loo_accuracy_binary"),
                                 ("human leave-one-out balanced accuracy", "human_loo_balanced_accuracy_binary"))]]
    lo = 0.0
    bands = []
    for limit, name in BANDS:
        bands.append((name, f"{fraction(lo)} – {fraction(min(limit, 1.0))}"))
        lo = limit
    return ("## Score rubric\n\n" + md_table([("reference", TEXT), ("value", TEXT)], rows) + "\n"
            + "Upstream's bands below are absolute: they ignore the interval and the humans (a random scorer on a "
              "handful of rows can land in \"Good\"). Read each figure's verdict instead.\n\n"
            + md_table([("band", TEXT), ("balanced accuracy", TEXT)], bands))


def _metric_rows(m: dict) -> list:
    ci = m.get("balanced_accuracy_ci95")
    return [("n", count(m["n"])), ("balanced accuracy", fraction(m["balanced_accuracy"])),
            ("95 % CI (clip bootstrap)", interval(ci)), ("verdict", m.get("verdict", "n/a")),
            ("band (upstream's, absolute: see the rubric)", m.get("band", "n/a")),
            ("accuracy", fraction(m["accuracy"])), ("precision", fraction(m["precision"])),
            ("recall", fraction(m["recall"])), ("specificity", fraction(m.get("specificity"))), ("F1", fraction(m["f1"])),
            ("AUROC", fraction(m.get("auroc"))), ("average precision", fraction(m.get("average_precision"))),
            ("tp / fp / tn / fn", " / ".join(count(m[k]) for k in ("tp", "fp", "tn", "fn")))]


METRIC_COLUMNS = [("metric", TEXT), ("value", TEXT)]


def too_small(r: dict, min_class_rows: int) -> str | None:
    """Why a slice's balanced accuracy is not shown (its minority class has too few rows), or None."""
    pos, neg = r.get("n_positive"), r.get("n_negative")
    if pos is None or neg is None or min(pos, neg) >= min_class_rows:
        return None
    fewer, name = (pos, "positive") if pos <= neg else (neg, "negative")
    if fewer == 0:
        return f"n/a (no {name}s)"
    return f"too small ({count(fewer)} {name}{'s' if fewer != 1 else ''})"


def _slice_table(records: list, key: str, min_class_rows: int) -> str:
    rows = []
    for r in records:
        small = too_small(r, min_class_rows)
        rows.append((r[key], r["n"], r.get("n_positive"), r.get("n_negative"),
                     small or fraction(r["balanced_accuracy"]),
                     "" if small else interval([r.get("balanced_accuracy_ci_low"), r.get("balanced_accuracy_ci_high")]),
                     "" if small else p_value(r.get("balanced_accuracy_q_bh")),
                     "" if small else fraction(r.get("balanced_accuracy_mde80")),
                     r["accuracy"], r["f1"], r.get("auroc")))
    supported = [r for r in records if not too_small(r, min_class_rows) and r.get("balanced_accuracy_q_bh") is not None]
    claims = sum(r["balanced_accuracy_q_bh"] <= 0.05 for r in supported)
    sentence = (f"\n{len(supported)} of {len(records)} slices have at least {min_class_rows} rows of each class and can "
                f"support a claim; {claims} differ from chance at q ≤ 0.05 (Benjamini–Hochberg over this table's "
                "slices; p: Fisher's exact test of decisions against truth). MDE: the smallest difference from 0.5 the slice detects with 80 % "
                "power at 5 %.\n")
    return md_table([(key, TEXT), ("n", COUNT), ("positive", COUNT), ("negative", COUNT), ("balanced accuracy", TEXT),
                     ("95 % CI", TEXT), ("q vs chance", TEXT), ("MDE", TEXT), ("accuracy", FRACTION), ("F1", FRACTION),
                     ("AUROC", FRACTION)], rows) + sentence


def vs_humans_table(v: dict) -> str:
    """The model as one more rater (summary.json["vs_humans"]): one row per scorer kind."""
    pw, loo = v["pairwise"], v["leave_one_out"]
    names = (("human (each rater vs each other)", "human"), ("this model", "model"),
             ("sampling prior (costs nothing)", "sampling_prior"))
    few = not loo["reliable"]  # leave-one-out on too few items: said, not shown
    rows = []
    for title, key in names:
        p, lo = pw.get(key, {}), loo.get(key, {})
        shown = [fraction(lo.get("accuracy")), fraction(lo.get("balanced_accuracy")),
                 signed(lo.get("balanced_accuracy_minus_human")), interval(lo.get("balanced_accuracy_minus_human_ci95"), signed),
                 interval(lo.get("balanced_accuracy_minus_human_raters_as_sampled_ci95"), signed)]
        rows.append((title, p.get("accuracy"), p.get("balanced_accuracy"), p.get("kappa"),
                     *([f"too few items ({loo['n_items']})", "", "", "", ""] if few else shown)))
    rows.append(("chance (a fair coin)", 0.5, 0.5, 0.0, "0.500", "0.500", "n/a", "n/a", "n/a"))
    return ("## The model as one more rater\n\n"
            "Scored exactly as a human is, on the humans' own targets. *Pairwise*: against each rater's votes on the "
            f"items that rater rated, averaged over raters ({pw['model']['n_raters']} raters, "
            f"{pw['model']['n_comparisons']:,} votes); the human row is each rater against each other rater on the same "
            f"items. *Leave-one-out*: on the {loo['n_comparisons']:,} identical comparisons (item, held-out rater) where "
            f"the other raters' majority is defined ({loo['n_items']:,} items): the held-out human's vote and the "
            "model's decision against the same target; Δ is model − human, with a paired clip-bootstrap interval.\n\n"
            + md_table([("rater", TEXT), ("pairwise acc", FRACTION), ("pairwise bal. acc", FRACTION), ("pairwise κ", SIGNED),
                        ("LOO acc", TEXT), ("LOO bal. acc", TEXT), ("Δ bal. acc vs human", TEXT),
                        ("95 % CI: these raters", TEXT), ("95 % CI: raters as sampled", TEXT)], rows)
            + raters_as_sampled_table(v.get("raters_as_sampled")))


def raters_as_sampled_table(r: dict | None) -> str:
    """The pairwise figures with both intervals: these raters, and raters as a sample."""
    if not r:
        return ""
    rows = [(title, fraction(r[key]["value"]) if key != "model_minus_human" else signed(r[key]["value"]),
             interval(r[key]["these_raters_ci95"], signed if key == "model_minus_human" else fraction),
             interval(r[key]["raters_as_sampled_ci95"], signed if key == "model_minus_human" else fraction))
            for title, key in (("the model against each rater (mean over raters)", "model_accuracy"),
                               ("human pairwise accuracy (mean over pairs)", "human_pairwise_accuracy"),
                               ("model − human", "model_minus_human"))]
    return (f"\n\nThe pairwise accuracies with two intervals: *these raters* resamples clips only; *raters as "
            f"sampled* also counts that these {r['raters']} raters are a sample of raters (a delete-one-rater "
            "jackknife; with three raters it spans most of the scale — three people say little about raters in "
            "general).\n\n" + md_table([("figure", TEXT), ("value", TEXT), ("95 % CI: these raters", TEXT),
                                         ("95 % CI: raters as sampled", TEXT)], rows))


def headline_table(s: dict, category: str) -> str:
    """The headlines, in the order to read them: the within-category (macro) AUROC, the balanced
    accuracy of cross-validated thresholds (per prompt, then one global), the balanced accuracy at
    the fixed threshold, and last the pooled AUROC, which mixes the prompts' base rates. Each with
    its interval, rows and :func:`metrics.verdict` (relative to chance and the humans)."""
    a, cv, o = s["auroc_headline"], s["thresholds_cv"], s["overall"]
    cat = category.replace("_", " ")
    rows = [(f"macro AUROC: mean of the AUROC within each {cat} ({a['n_categories']} with both classes)",
             fraction(a["macro_auroc"]), interval(a["macro_auroc_ci95"]), count(o["n"]), a.get("macro_auroc_verdict", ""))]
    for key, title in (("per_prompt", "one threshold per prompt"), ("global", "one threshold")):
        if key in cv:
            rows.append((f"balanced accuracy, cross-validated {title} ({cv['folds']} folds by clip)",
                         fraction(cv[key]["balanced_accuracy"]), interval(cv[key]["ci95"]), count(cv[key]["n"]),
                         cv[key].get("verdict", "")))
    rows.append((f"balanced accuracy at the fixed threshold {s['threshold']:g}", fraction(o["balanced_accuracy"]),
                 interval(o.get("balanced_accuracy_ci95")), count(o["n"]), o.get("verdict", "")))
    rows.append(("AUROC pooled over all prompts (mixes their base rates: read the macro figure)", fraction(a["auroc"]),
                 interval(a["auroc_ci95"]), count(o["n"]), a.get("auroc_verdict", "")))
    h = (s.get("human_reference") or {}).get("balanced_accuracy")
    human = (f"the humans' own pairwise balanced accuracy, {fraction(h)}" if h is not None else
             "no human figure (the analysis run's human figures rest on too few items)")
    against = against_rater_models_table(s, a, cv.get("per_prompt", {}), o)
    return ("## Headlines\n\n"
            f"Read them in this order. The macro AUROC ranks clips within each {cat}, so a score that only knows how "
            "often each prompt is present gains nothing from it; the pooled AUROC does gain (it is listed last). "
            "Cross-validated thresholds are chosen on the other folds of clips only, and their interval re-chooses "
            "them in every resample. A fixed threshold can make a good model look like chance (a CLAP model's cosines "
            "are mostly positive, so 0 means \"always present\"). Intervals: clip bootstrap, 95 %. The verdict "
            "compares the interval with chance (0.5) and, for balanced accuracy, with " + human + "; it never reads "
            "better than \"indistinguishable from chance\" while the interval includes 0.5, and needs "
            f"{count(s.get('min_class_rows', 0))} rows of each class.\n\n"
            + md_table([("headline", TEXT), ("value", TEXT), ("95 % CI", TEXT), ("rows", TEXT), ("verdict", TEXT)], rows)
            + against)



def against_rater_models_table(s: dict, a: dict, cv: dict, o: dict) -> str:
    """The headlines against the majority and against each rater model's label, with a
    verdict per cell and whether the model's standing (the verdict) changes."""
    models = {k: v for k, v in (s.get("against_rater_models") or {}).items() if v}
    if not models:
        return ""
    rows = [("majority vote (upstream's label)", "—", f"{fraction(a['macro_auroc'])} {interval(a['macro_auroc_ci95'])}",
             a.get("macro_auroc_verdict", ""), f"{fraction(cv.get('balanced_accuracy'))} {interval(cv.get('ci95'))}",
             cv.get("verdict", ""), f"{fraction(o['balanced_accuracy'])} {interval(o.get('balanced_accuracy_ci95'))}", "—")]
    changed = []
    for key, m in models.items():
        if m["one_class"]:
            rows.append((MODEL_TITLES[key], count(m["labels_differ_from_majority"]), "n/a", "one class only: no reference",
                         "n/a", "", "n/a", "—"))
            continue
        moves = [m["macro_auroc_verdict"] != a.get("macro_auroc_verdict"),
                 m["cv_balanced_accuracy_per_prompt_verdict"] != cv.get("verdict")]
        if any(moves):
            changed.append(MODEL_TITLES[key])
        rows.append((MODEL_TITLES[key], count(m["labels_differ_from_majority"]),
                     f"{fraction(m['macro_auroc'])} {interval(m['macro_auroc_ci95'])}", m["macro_auroc_verdict"],
                     f"{fraction(m['cv_balanced_accuracy_per_prompt'])} {interval(m['cv_balanced_accuracy_per_prompt_ci95'])}",
                     m["cv_balanced_accuracy_per_prompt_verdict"] or "",
                     f"{fraction(m['balanced_accuracy'])} {interval(m['balanced_accuracy_ci95'])}", "yes" if any(moves) else "no"))
    standing = (f"The model's standing changes against {', '.join(changed)}." if changed else
                "The model's standing (the verdicts) is the same against every reference.")
    return ("\n\n### Against the rater models\n\nThe same headlines with each rater model's label (analysis.py's "
            "latent-class fits, `rater_models.csv`) as the truth instead of the majority, on the same rows. " + standing
            + "\n\n" + md_table([("reference", TEXT), ("labels ≠ majority", TEXT), ("macro AUROC", TEXT), ("verdict", TEXT),
                                  ("CV balanced accuracy per prompt", TEXT), ("verdict", TEXT),
                                  (f"balanced accuracy at {s['threshold']:g}", TEXT), ("standing changes", TEXT)], rows))


def soft_label_section(s: dict) -> str:
    """The soft-label twins and the calibration figures (summary.json["soft_labels"])."""
    b = s.get("soft_labels") or {}
    if not b.get("model"):
        return ""
    names = [("Brier score vs the vote fraction (0 best)", "brier_vote_fraction"),
             ("Jensen–Shannon divergence vs the vote fraction (bits, 0 best)", "jensen_shannon_vote_fraction"),
             ("Brier score vs the Dawid–Skene posterior", "brier_dawid_skene"),
             ("Jensen–Shannon divergence vs the Dawid–Skene posterior", "jensen_shannon_dawid_skene"),
             ("soft AUROC, macro over categories (votes as weights)", "soft_macro_auroc"),
             ("soft AUROC, pooled", "soft_auroc"),
             ("expected calibration error vs the vote fraction", "ece_vote_fraction"),
             ("expected calibration error vs the majority", "ece_majority")]
    def fig(f, k):  # calibration errors of a well-fitted map are small: four decimals
        return value_ci(f, threshold if k.startswith("ece") else fraction)

    rows = [(title, fig(b["model"][k], k), fig(b["sampling_prior"][k], k)) for title, k in names if k in b["model"]]
    return ("## Soft labels and calibration\n\n"
            f"Every scored item at its vote fraction (the share of its raters saying present) instead of its majority: "
            f"{count(b['items'])} items, of which {count(b['items_tied'])} split evenly (the hard figures count them "
            f"absent) and {count(b['items_one_rater'])} have one rater (the hard figures take that vote as the label). "
            f"The model's probability: {b['probability']}; the sampling prior gets the same map. A constant probability "
            "equal to the mean vote is perfectly calibrated and ranks nothing, so read calibration beside the soft "
            "AUROC, never alone. Intervals: clip bootstrap, 95 %, the map re-fitted in every resample; the "
            "reliability diagram's bins are in `calibration.csv`.\n\n"
            + md_table([("figure", TEXT), ("this model", TEXT), ("sampling prior (costs nothing)", TEXT)], rows))


def noise_ceiling_section(s: dict) -> str:
    """The noise ceiling beside the model, the sampling prior and the humans (summary.json["noise_ceiling"])."""
    c = s.get("noise_ceiling")
    if not c or not c.get("ceiling"):
        return ""
    fig = value_ci

    rows = [("ceiling: knows each clip's class", fig(c["ceiling"]), "1.000", count(c["items"])),
            ("the votes' own predictor (the other votes)", fig(c["votes_own_predictor"]), "n/a", count(c["items"])),
            ("constant: always the commoner vote", fig(c["constant_predictor"]), "0.000", count(c["items"]))]
    for title, key in (("this model", "model"), ("sampling prior", "sampling_prior"), ("humans (one rater vs another)", "humans")):
        if key in c:
            rows.append((title, fig(c[key]["agreement_with_votes"]),
                         f"{fig(c[key]['headroom_reached'])}: {c[key]['band']}", count(c[key]["items"])))
    g = c.get("mean_rating_reliability") or {}
    graded = ""
    if g.get("reliability_of_mean"):
        graded = (f"\n\nGraded ratings: single ratings agree with ICC(1) = {fig(g['icc1'])}; the mean of "
                  f"{g['raters_per_item']:.2f} ratings per item is reliable to {fig(g['reliability_of_mean'])} "
                  f"(Spearman–Brown), so no scorer correlates with it beyond about {fig(g['correlation_ceiling'])} "
                  "(√reliability; the graded ρ above reads against this).\n")
    return ("## The noise ceiling\n\n"
            "How often a scorer's decision equals a new human vote (per item, the share of its votes it matches). No "
            "scorer can beat the ceiling: even knowing every clip's class, the next vote is a noisy rater's "
            f"(raters' mean sensitivity {fraction(c['mean_sensitivity'])}, specificity {fraction(c['mean_specificity'])}, "
            "from the Dawid–Skene fit). Headroom reached = (agreement − constant) / (ceiling − constant): 0 is the "
            "constant prediction, 1 the ceiling, below 0 worse than always giving the commoner vote. Intervals: clip "
            "bootstrap, the Dawid–Skene fit re-run in every resample.\n\n"
            + md_table([("predictor", TEXT), ("agreement with a new vote", TEXT), ("headroom reached", TEXT), ("items", TEXT)],
                       rows) + graded)


def alt_test_section(a: dict) -> str:
    """The alternative annotator test (summary.json["alt_test"]): per scorer, the verdict, ω, ρ
    and the random-rater control; per rater, its items, advantage probabilities and q."""
    rows, per_rater = [], []
    for title, key in (("this model", "model"), ("this model, ordinal (ranks)", "model_ordinal"),
                       ("sampling prior (costs nothing)", "sampling_prior")):
        if key not in a:
            continue
        t = a[key]
        eps = f"{t['epsilon']:g}"
        rows.append((title, t["verdict"], fraction(t["winning_rate"]),
                     interval(t.get("winning_rate_raters_as_sampled_ci95")), fraction(t["rho"]),
                     f"{t['n_raters_tested']} of {t['n_raters']}", count(t["n_items"]), t["at_epsilon_0"]["verdict"],
                     f"{t['random_rater']['verdict']} (ρ {fraction(t['random_rater']['rho'])})"))
        for r in t["per_rater"]:
            per_rater.append((title, r["rater"], r["n_items"], fraction(r["rho_model"]), fraction(r["rho_rater"]),
                              p_value(r.get("q_by")), text(r.get("model_beats_rater")) if r.get("p") is not None
                              else "too few items"))
    t = a["model"]
    slices = []
    for key, records in a.items():
        if key.startswith("by_"):
            tested = [r for r in records if r["model"]["verdict"] != "too few"]
            replace = sum(r["model"]["verdict"].startswith("may replace") for r in tested)
            slices.append(f"by {key[3:].replace('_', ' ')}: {len(tested)} of {len(records)} slices can be tested, the "
                          f"model may replace a rater in {replace}")
    t = a["model"]
    return ("## May the model replace a rater? (alternative annotator test)\n\n"
            f"For each rater, on the items they rated with at least two others: does the model agree with the others "
            f"at least as often as the rater does, allowing the humans an advantage of ε = {eps}? One-sided paired "
            f"t-test per rater, Benjamini–Yekutieli over raters at q ≤ {t['alpha']:g}; ω is the share of raters "
            f"the model beats (≥ 0.5: it may replace one), ρ its average advantage probability (for ranking "
            f"scorers). Raters with fewer than {t['min_items']} such items are not tested; fewer than "
            f"{t['min_raters']} tested raters: \"too few\". The control is a random rater calling present as often; "
            "when it passes too, the verdict is inconclusive at that ε. The ordinal row compares ranks: each rater's "
            "ratings and the model's similarities as percentile ranks, aligned by −RMSE (the paper's ranking "
            "variant); its control is a random ranking.\n\n"
            + (f"{t['why']}.\n\n" if t.get("why") else "")
            + md_table([("scorer", TEXT), (f"verdict at ε = {eps}", TEXT), ("ω", TEXT),
                        ("ω, raters as sampled (95 %)", TEXT), ("ρ", TEXT), ("raters tested", TEXT),
                        ("items", TEXT), ("verdict at ε = 0", TEXT), ("random rater", TEXT)], rows)
            + "\n\n" + md_table([("scorer", TEXT), ("rater", TEXT), ("items", COUNT), ("ρ scorer", TEXT),
                                  ("ρ rater", TEXT), ("q (BY)", TEXT), ("beats the rater", TEXT)], per_rater)
            + ("\n\nWithin slices (summary.json `alt_test.by_*`, exact match at ε = " + eps + "): "
               + "; ".join(slices) + ". Each slice's verdict is its own test: over many slices a few pass by chance "
                 "(no adjustment across slices).\n" if slices else ""))


def graded_table(g: dict, category: str) -> str:
    ref = g["human_reference"]
    if not ref["reliable"]:  # too few comparisons to say anything: said, not shown
        ref = {side: {"rho": None, "ci95": None, "n": ref[side]["n"]} for side in ("human", "model")}
    rows = [("model similarity vs the mean rating of each item", signed(g["overall"]["rho"]),
             interval(g["overall"]["ci95"], signed), count(g["overall"]["n"])),
            ("a human's rating vs the mean of the other raters'", signed(ref["human"]["rho"]),
             interval(ref["human"]["ci95"], signed), count(ref["human"]["n"])),
            ("model similarity vs the same means", signed(ref["model"]["rho"]),
             interval(ref["model"]["ci95"], signed), count(ref["model"]["n"]))]
    return (f"## Graded labels (Spearman's ρ)\n\nTarget: {g['target']}. Per {category.replace('_', ' ')}: "
            f"summary.json `graded.by_{category}`.\n\n"
            + md_table([("comparison", TEXT), ("ρ", TEXT), ("95 % CI", TEXT), ("n", TEXT)], rows))


def template_table(block: dict) -> str:
    """The prompt-template section: each template's AUROC and balanced accuracy on the same rows,
    the ensemble, and the spread (which figure to read, and why the best one is optimistic)."""
    rows = [(r["template"], f"`{r['text']}`", block["n"], r["auroc"], r["balanced_accuracy"]) for r in block["per_template"]]
    e = block["ensemble"]
    rows.append(("**ensemble**", "mean of the similarities above", block["n"], e["auroc"], e["balanced_accuracy"]))
    sp = block["spread"]
    spread = [(name, sp[key]["best"], sp[key]["mean"], sp[key]["worst"])
              for name, key in (("AUROC", "auroc"), ("balanced accuracy", "balanced_accuracy"))]
    return ("## Prompt templates\n\nEvery row scored under each wording of the query; the headline above is the "
            "ensemble (each row's mean similarity over the templates, which for cosine equals the cosine with the mean "
            f"of the normalised text embeddings). Balanced accuracy at threshold {block['threshold']:g}.\n\n"
            + md_table([("template", TEXT), ("text", TEXT), ("n", COUNT), ("AUROC", FRACTION), ("balanced accuracy", FRACTION)], rows)
            + "\n\nSpread over the templates — read the mean (or the ensemble): the best is picked on these very rows, "
              "so it overstates what a wording chosen in advance would give.\n\n"
            + md_table([("figure", TEXT), ("best", FRACTION), ("mean", FRACTION), ("worst", FRACTION)], spread) + "\n")


WEAK_LABELS = 0.25  # a warning when more than this share of labels rests on one vote or a tie


def label_support_line(ls: dict | None) -> str:
    """The run section's line on what the labels rest on, with a warning when many are weak."""
    if not ls or not ls["items"]:
        return ""
    weak = ls["one_rater"] + ls["tie_resolved_to_absent"]
    line = (f"- labels: of {ls['items']:,} items, {ls['one_rater']:,} rest on one rater's vote and "
            f"{ls['tie_resolved_to_absent']:,} on an even split of the raters resolved to absent (upstream's tie rule); "
            f"{ls['several_raters_agreeing']:,} on a majority of several raters\n")
    if weak / ls["items"] > WEAK_LABELS:
        line += (f"- ⚠ weak labels: {pct(weak / ls['items'])} of the items scored have no majority of several raters; "
                 "a model is scored against one person's answer (or a coin-flip rule) on those\n")
    return line


def benchmark_report(r, figures=None) -> str:
    s, subset = r.summary, r.subset
    sim = s["similarity"]
    fs = s["filter_stats"]
    mcr = s.get("min_class_rows", 0)
    parts = [f"# {subset.name} — benchmark report\n", score_rubric(s)]
    if "auroc_headline" in s:
        parts.append(headline_table(s, subset.category_slice))
    if "vs_humans" in s:
        parts.append(vs_humans_table(s["vs_humans"]))
    if "alt_test" in s:
        parts.append(alt_test_section(s["alt_test"]))
    if "graded" in s:
        parts.append(graded_table(s["graded"], subset.category_slice))
    if "soft_labels" in s:
        parts.append(soft_label_section(s))
    if s.get("noise_ceiling"):
        parts.append(noise_ceiling_section(s))
    if "prompt_templates" in s:
        parts.append(template_table(s["prompt_templates"]))
    endpoint = s["endpoint"] if isinstance(s["endpoint"], (str, type(None))) else ", ".join(s["endpoint"])
    info = s.get("scorer")
    model = (f" (model `{info['model']}`, {info['backend']} backend, {info['similarity']} similarity, first "
             f"{info['max_seconds']:g} s of each clip)") if info else ""
    parts.append(
        "## Run\n\n"
        f"- mode: `{s['mode']}`" + (f" (endpoint {endpoint})" if endpoint else "") + model + "\n"
        f"- filter: {s['filter_mode']} — {fs['input']:,} labelled items, {fs['dropped_below_min_raters']:,} below the "
        f"minimum raters, {fs['dropped_flagged']:,} flagged, {fs['dropped_non_unanimous']:,} not unanimous, "
        f"{fs['kept']:,} kept"
        + (f"; a random sample of {fs['limit']['rows']:,} rows of them, drawn clip by clip with seed "
           f"{fs['limit']['seed']} (`--limit`)" if "limit" in fs and fs["limit"]["rows"] < fs["kept"] else "") + "\n"
        f"- rows: {s['rows_total']:,} scored rows, {s['rows_evaluated_ok']:,} ok, {s['missing_audio']:,} without audio, "
        f"{s['evaluation_errors']:,} scoring errors\n"
        + label_support_line(s.get("label_support"))
        + f"- threshold: present iff similarity ≥ {s['threshold']:g}\n"
        f"- similarity: min {signed(sim['min'])}, median {signed(sim['median'])}, max {signed(sim['max'])}\n"
    )
    parts.append(f"## Headline — {s['filter_mode']}\n\n" + md_table(METRIC_COLUMNS, _metric_rows(s["overall"])))
    parts.append("## Unanimous items only\n\n" + md_table(METRIC_COLUMNS, _metric_rows(s["unanimous_subset"])))
    parts.append(f"## By {subset.type_slice.replace('_', ' ')}\n\n" + _slice_table(s[f"by_{subset.type_slice}"], subset.type_slice, mcr))
    parts.append("## By benchmark bucket\n\n" + _slice_table(s["by_benchmark_bucket"], "benchmark_bucket", mcr))
    parts.append(f"## By {subset.category_slice.replace('_', ' ')}\n\n"
                 + _slice_table(s[f"by_{subset.category_slice}"], subset.category_slice, mcr))
    b = s["bootstrap"]
    parts.append(f"Intervals: {b['draws']} bootstrap resamples of clips (all rows of a clip together), seed {b['seed']}.\n")
    bt = s.get("best_threshold") or {}
    if bt.get("threshold") is not None:
        parts.append(f"For reference only (never used for the numbers above; `best_threshold` in summary.json, marked "
                     f"`tuned_on_the_scored_rows`): the threshold with the highest balanced accuracy on these rows would be {bt['threshold']:.4f}, giving {bt['balanced_accuracy']:.3f}; "
                     f"choosing it on the test rows would overstate the model.\n")
    if figures:
        parts.append("## Figures\n\n" + figure_block(figures))
    parts.append(score_rubric(s))
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# comparison report


def comparison_report(board: pd.DataFrame, pairs: pd.DataFrame, figure: str | None, *, draws: int, seed: int,
                      separated: dict | None = None, by_slice: pd.DataFrame | None = None,
                      references: pd.DataFrame | None = None) -> str:
    parts = ["# emolia-bench — comparison of runs\n"]
    if figure:
        parts.append(f"![Paired differences between runs]({figure})\n")
    overall = board[board["slice"] == "overall"]
    flagged = overall[overall["one_class"].astype(bool)]
    parts.append("## Leaderboard\n\nRanked by macro AUROC (mean of the AUROC within each category: no threshold, "
                 "no prompt base rates), then the balanced accuracy of cross-validated per-prompt thresholds, then the "
                 "balanced accuracy at each run's fixed threshold. Intervals: each run's own clip bootstrap; whether two "
                 "runs differ is in the paired tests below.\n\n" + md_table(
                     [("subset", TEXT), ("run", TEXT), ("n", COUNT), ("macro AUROC", FRACTION), ("95 % CI", INTERVAL),
                      ("CV balanced accuracy", FRACTION), ("95 % CI", INTERVAL), ("balanced accuracy", FRACTION),
                      ("95 % CI", INTERVAL), ("threshold", THRESHOLD), ("called present", TEXT), ("mode", TEXT),
                      ("rank (95 % CI)", TEXT)],
                     [(r.subset, r.run + (" ⚠ one class" if r.one_class else ""), r.n, r.macro_auroc,
                       [r.macro_auroc_ci_low, r.macro_auroc_ci_high], r.cv_balanced_accuracy, [r.cv_ci_low, r.cv_ci_high],
                       r.balanced_accuracy, [r.ci_low, r.ci_high], r.threshold, pct(r.share_called_present), r.mode,
                       "n/a" if pd.isna(r.rank) else f"{r.rank:g} [{r.rank_low:g}, {r.rank_high:g}]")
                      for r in overall.itertuples()]))
    for name, sep in (separated or {}).items():
        parts.append(f"{name}: {sep['separated']} of {sep['pairs']} run pairs differ in macro AUROC (paired 95 % "
                     "interval excluding 0): the benchmark's separability. Ranks by macro AUROC on the rows every "
                     "run scored, intervals over the same clip resamples for all runs.\n")
    if len(flagged):
        parts.append("⚠ one class: " + "; ".join(f"{r.run} ({r.subset}) calls {pct(r.share_called_present)} of its rows "
                                                 "present" for r in flagged.itertuples())
                     + f". At or beyond {ONE_CLASS_SHARE:.0%} of rows in one class, a balanced accuracy at the fixed "
                       "threshold is about 0.5 whatever the scores; read the macro AUROC and the cross-validated figure.\n")
    parts.append("## Paired tests\n\nΔ = B minus A on the rows both scored; interval and p from a paired bootstrap "
                 f"over clips ({draws} draws, seed {seed}: both runs scored on the same resamples).\n\n"
                 "### The headlines no threshold was tuned for\n\n" + md_table(
                     [("subset", TEXT), ("A", TEXT), ("B", TEXT), ("rows", COUNT), ("Δ macro AUROC", SIGNED),
                      ("95 % CI", INTERVAL), ("p", P_VALUE), ("Δ CV balanced accuracy", SIGNED), ("95 % CI", INTERVAL),
                      ("p", P_VALUE)],
                     [(r.subset, r.run_a, r.run_b, r.rows, r.macro_auroc_difference,
                       [r.macro_auroc_difference_ci_low, r.macro_auroc_difference_ci_high], r.macro_auroc_p_bootstrap,
                       r.cv_balanced_accuracy_difference,
                       [r.cv_balanced_accuracy_difference_ci_low, r.cv_balanced_accuracy_difference_ci_high],
                       r.cv_balanced_accuracy_p_bootstrap) for r in pairs.itertuples()])
                 + "\n\n### Balanced accuracy at the fixed threshold\n\nThe p-value to read is the clip-level "
                   "sign-flip permutation test (it keeps the rows of a clip together; the bootstrap p is kept for "
                   "reference); b: rows A got right and B wrong, c: the reverse.\n\n" + md_table(
                     [("subset", TEXT), ("A", TEXT), ("B", TEXT), ("rows", COUNT), ("Δ", SIGNED), ("95 % CI", INTERVAL),
                      ("p (bootstrap)", P_VALUE), ("b", COUNT), ("c", COUNT), ("p (clip sign-flip)", P_VALUE)],
                     [(r.subset, r.run_a, r.run_b, r.rows, r.difference, [r.difference_ci_low, r.difference_ci_high],
                       r.p_bootstrap, r.a_right_b_wrong, r.b_right_a_wrong, r.p_sign_flip) for r in pairs.itertuples()]))
    if by_slice is not None and len(by_slice):
        claims = int((by_slice["q_bh"] <= 0.05).sum())
        parts.append("## Paired differences by slice\n\nΔ balanced accuracy (B − A) within each task type / "
                     "polarity, paired clip bootstrap; q: Benjamini–Hochberg over the slices of each pair. "
                     f"{claims} of {len(by_slice)} slice differences hold at q ≤ 0.05.\n\n" + md_table(
                         [("subset", TEXT), ("A", TEXT), ("B", TEXT), ("slice", TEXT), ("rows", COUNT), ("Δ", SIGNED),
                          ("95 % CI", INTERVAL), ("p", P_VALUE), ("q (BH)", P_VALUE)],
                         [(r.subset, r.run_a, r.run_b, r.slice, r.rows, r.difference,
                           [r.difference_ci_low, r.difference_ci_high], r.p_bootstrap, r.q_bh)
                          for r in by_slice.itertuples()]))
    if references is not None and len(references):
        flips = references[references["rank_flip"].astype(bool)][["subset", "reference"]].drop_duplicates()
        said = ("⚠ rank flip: " + "; ".join(f"{r.subset} against {MODEL_TITLES.get(r.reference, r.reference)}"
                                            for r in flips.itertuples())
                + " orders the runs differently from the majority (by the point macro AUROC; read it beside the rank "
                  "intervals)." if len(flips) else "Every reference orders the runs as the majority does.")
        parts.append("## Does the ranking depend on the label?\n\nEach run's macro AUROC against the majority and "
                     "against each rater model's label (benchmark.py's `against_rater_models`), and its rank. "
                     + said + "\n\n" + md_table(
                         [("subset", TEXT), ("reference", TEXT), ("run", TEXT), ("macro AUROC", FRACTION), ("rank", TEXT),
                          ("rank flip", TEXT)],
                         [(r.subset, MODEL_TITLES.get(r.reference, r.reference), r.run, r.macro_auroc, f"{r.rank:g}",
                           "yes" if r.rank_flip else "no") for r in references.itertuples()]))
    rest = board[board["slice"] != "overall"]
    parts.append("## By slice\n\n" + md_table(
        [("subset", TEXT), ("slice", TEXT), ("run", TEXT), ("n", COUNT), ("balanced accuracy", FRACTION),
         ("95 % CI", INTERVAL)],
        [(r.subset, r.slice, r.run, r.n, r.balanced_accuracy, [r.ci_low, r.ci_high]) for r in rest.itertuples()]))
    return "\n".join(parts)
