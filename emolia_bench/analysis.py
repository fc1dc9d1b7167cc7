"""One subset's analysis: labels, slice tables, agreement and summary.json (README: “2. analysis.py”)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import agreement as ag
from .labels import (
    benchmark_labels,
    clean_annotations,
    incomplete_items,
    item_table,
    slice_table,
    unmatched_flags,
    votes_table,
)
from .rater_models import fit_rater_models
from .raters import FLAG_RULE, clip_durations_ms, rater_profiles
from .resampling import Bootstrap
from .subsets import Subset
from .summary import HUMAN_ALIASES


@dataclass
class SubsetAnalysis:
    subset: Subset
    labels: pd.DataFrame
    tables: dict[str, pd.DataFrame]  # file name -> slice table
    incomplete: pd.DataFrame
    summary: dict
    users: pd.DataFrame
    flags: pd.DataFrame | None = None
    unmatched: pd.DataFrame = field(default_factory=pd.DataFrame)
    raters: pd.DataFrame = field(default_factory=pd.DataFrame)  # one profile per rater (raters.csv)
    votes: pd.DataFrame = field(default_factory=pd.DataFrame)  # the cleaned votes (votes.csv)
    rater_models: pd.DataFrame = field(default_factory=pd.DataFrame)  # per item (rater_models.csv)


def flag_records(flags: pd.DataFrame | None) -> list[dict]:
    """flags.csv as records, each column typed as pandas' CSV reader infers it.

    Upstream reads flags.csv with ``pd.read_csv`` and dumps the records, so an all-integer
    column (``level`` of numeric dimensions) is written as JSON numbers, an integer column
    with an empty cell as floats, an empty cell as null; the worked example requires exactly
    that. The same inference is reproduced by a round trip through CSV text (the loaders keep
    every value a string, which the rest of the analysis relies on).
    """
    if flags is None or len(flags) == 0:
        return []
    import io

    typed = pd.read_csv(io.StringIO(flags.to_csv(index=False)))
    return typed.astype(object).where(typed.notna(), None).to_dict(orient="records")


@dataclass
class Labelled:
    """One subset's votes cleaned and its items labelled (the first steps of README “2. analysis.py”): what the slice
    tables, and everything :func:`analyze_labelled` computes, are made from."""
    subset: Subset
    rows_raw: int  # annotation rows, after any excluded rater's are dropped
    excluded: list[str]  # raters whose votes were dropped
    clean: pd.DataFrame
    items: pd.DataFrame
    labels: pd.DataFrame
    tables: dict[str, pd.DataFrame]  # file name -> slice table


def label_subset(subset: Subset, ann: pd.DataFrame, flags: pd.DataFrame | None,
                 exclude_raters: tuple[str, ...] = ()) -> Labelled:
    """Clean the votes, build the items and their majority-vote labels and the slice tables.
    ``exclude_raters``: usernames whose votes are dropped before anything is computed."""
    excluded = sorted(set(exclude_raters) & set(ann["username"].unique())) if exclude_raters else []
    if excluded:
        ann = ann[~ann["username"].isin(excluded)].reset_index(drop=True)
    clean = clean_annotations(ann, subset)
    items = item_table(clean, subset, flags)
    labels = benchmark_labels(items, subset)
    tables = {t.file: slice_table(labels, t) for t in subset.slice_tables}
    return Labelled(subset, len(ann), excluded, clean, items, labels, tables)


def analyze_subset(subset: Subset, ann: pd.DataFrame, users: pd.DataFrame, flags: pd.DataFrame | None, *,
                   bootstrap: Bootstrap, min_items: int = ag.MIN_ITEMS, exclude_raters: tuple[str, ...] = (),
                   dataset_root: Path | None = None) -> SubsetAnalysis:
    """Everything analysis.py writes for one subset: the votes cleaned and labelled
    (:func:`label_subset`), agreement with its intervals (``bootstrap``), summary.json and the
    rater profiles. ``exclude_raters``: usernames whose votes are dropped first;
    ``dataset_root``: where clip durations are looked up for the rater profiles (optional)."""
    lab = label_subset(subset, ann, flags, exclude_raters)
    clean, items, labels, tables = lab.clean, lab.items, lab.labels, lab.tables

    rater_codes, raters = pd.factorize(clean["username"].to_numpy(), sort=True)  # codes in name order
    raters = list(raters)
    votes = pd.DataFrame({
        "item": clean["item"].to_numpy(),
        "rater": rater_codes.astype(np.int64),
        "binary": clean["binary"].to_numpy(),
        "value": clean["value"].to_numpy(),
    })
    panel = ag.Panel(votes, subset.ordinal)  # pairs, complete items and matrices, derived once
    ci = ag.intervals(ag.agreement_figures(panel, len(subset.scale)), bootstrap)
    agreement = ag.human_agreement(panel, raters, len(subset.scale), ci)
    augmented = ag.augmented_agreement(votes, items)

    n = items["n_raters"]
    s: dict = {
        "subset": subset.name,
        "rating_scale": list(subset.scale),
        "rows_raw": int(lab.rows_raw),
        "rows_deduplicated": int(len(clean)),
        "items_total": int(len(items)),
        "items_complete": int((n == panel.size).sum()),
        "items_incomplete": int((n != panel.size).sum()),
        "complete_item_raters": int(panel.size),  # [ours] a complete item's raters: 3, or 2 in a two-rater panel
    }
    if subset.has_flags:
        s["items_flagged"] = int(items["flagged"].sum())
    s["rater_coverage"] = {str(k): int(v) for k, v in n.value_counts().sort_index().items()}
    s["annotators"] = users["username"].tolist()
    s["raters_present"] = raters  # [ours] those who rated in this run (after --exclude-raters)
    s["agreement"] = agreement
    s["augmented_agreement"] = augmented
    for key, column in ((subset.positive_rate_key, "majority_present"),
                        (subset.prior_match_rate_key, subset.prior_match_column)):
        s[key] = float(labels[column].mean()) if len(labels) else None
    for key, file, rows, _, _ in subset.summary_tables:
        t = tables[file]
        t = t.head(5) if rows == "first5" else t.tail(5) if rows == "last5" else t
        s[key] = t.to_dict(orient="records")
    unmatched = unmatched_flags(items, flags, subset) if subset.has_flags else pd.DataFrame()
    if subset.has_flags:
        s["flags"] = flag_records(flags)
        s["flags_unmatched"] = flag_records(unmatched)
    for alias, key in HUMAN_ALIASES:
        s[alias] = agreement[key]
    s["bootstrap"] = {"seed": bootstrap.seed, "draws": bootstrap.draws, "unit": "item", "interval": "percentile 95%"}
    # [ours] every figure with its support and interval, agreement within slices, rater profiles
    s["agreement_detail"] = ag.agreement_detail(panel, raters, len(subset.scale), agreement, ci, min_items)
    s[f"agreement_by_{subset.type_slice}"] = ag.agreement_by_slice(
        votes, items[subset.type_slice], subset.ordinal, len(subset.scale), panel=panel.size, bootstrap=bootstrap,
        min_items=min_items)
    clip_ms = clip_durations_ms(items, subset, dataset_root) if dataset_root is not None else None
    profiles = rater_profiles(clean, votes, raters, clip_ms)
    s["raters"] = {"flag_rule": FLAG_RULE, "flagged": profiles.loc[profiles["flagged"], "rater"].tolist() if len(profiles) else [],
                   "excluded": lab.excluded}
    # [ours] latent-class rater models beside the majority vote
    by_code = items.reindex(range(int(votes["item"].max()) + 1 if len(votes) else 0))
    block, per_item, per_rater = fit_rater_models(votes, raters, by_code["majority_present"].to_numpy(),
                                                  by_code["majority_present_tie"].to_numpy(dtype=bool), bootstrap=bootstrap)
    s["rater_models"] = block
    if len(profiles) and len(per_rater.columns) > 1:
        profiles = profiles.merge(per_rater, on="rater", how="left")
    models = pd.concat([by_code[list(subset.item_key)].reset_index(drop=True), per_item.reset_index(drop=True)], axis=1)
    return SubsetAnalysis(subset, labels, tables, incomplete_items(items, subset, panel.size), s, users, flags, unmatched, profiles,
                          votes_table(clean, subset), models.sort_values(list(subset.item_key), kind="stable")
                          .reset_index(drop=True))


