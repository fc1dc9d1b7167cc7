"""Cleaning, majority vote, benchmark labels and slice tables (README: “2. analysis.py”).

All of it is vectorised: items get integer codes, votes become an items × levels count matrix,
and the majority vote is an argmax over that matrix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .subsets import SliceTable, Subset


def clean_annotations(ann: pd.DataFrame, subset: Subset) -> pd.DataFrame:
    """One row per (item, rater): each rater's latest ``created_at`` wins.

    ``created_at`` is validated as ``YYYY-MM-DD HH:MM:SS``, so string order is time order. With
    equal timestamps the row later in the file wins [ours]. Rows stay in file order.
    Adds ``item`` (code of the item key, in sorted key order), ``value`` (rating as int on the
    scale) and ``binary`` (0/1 target).
    """
    item = sorted_group_codes([ann[k] for k in subset.item_key])
    rater = pd.factorize(ann["username"])[0]
    vote = item * (int(rater.max()) + 1 if len(rater) else 1) + rater
    keep = np.ones(len(ann), dtype=bool)
    repeated = pd.Series(vote).duplicated(keep=False).to_numpy()
    if repeated.any():
        # re-ratings are rare: order just those rows by (vote, created_at, file position) and
        # keep the last of each vote
        rows = np.flatnonzero(repeated)
        stamps = pd.factorize(ann["created_at"].to_numpy()[rows], sort=True)[0]
        order = rows[np.lexsort((rows, stamps, vote[rows]))]
        superseded = vote[order][:-1] == vote[order][1:]
        keep[order[:-1][superseded]] = False
    df = ann[keep].copy()
    codes = {label: i for i, label in enumerate(subset.scale)}
    df["value"] = df["rating"].map(codes).astype(np.int64)
    df["binary"] = (df["value"] >= subset.present_from).astype(np.int64)
    # codes stay dense after dropping superseded rows: a superseded vote leaves its item's
    # latest vote behind, so no item disappears
    df["item"] = item[keep]
    return df


VOTE_COLUMNS = ("rater", "rating", "binary")


def votes_table(clean: pd.DataFrame, subset: Subset) -> pd.DataFrame:
    """votes.csv: the cleaned votes (each rater's latest vote per item), one row per item and
    rater — the item key, ``rater``, ``rating`` and its 0/1 ``binary`` value — sorted by key then
    rater, for downstream stages that compare a model with each human (benchmark.py)."""
    keys = list(subset.item_key)
    out = clean[keys].copy()
    out["rater"] = clean["username"].to_numpy()
    out["rating"] = clean["rating"].to_numpy()
    out["binary"] = clean["binary"].to_numpy()
    return out.sort_values([*keys, "rater"], kind="stable").reset_index(drop=True)


def sorted_group_codes(columns: list[pd.Series]) -> np.ndarray:
    """Code of each row's key tuple, numbered in sorted tuple order (``groupby(sort=True).ngroup()``).

    Each column is factorized in sorted order and the codes are folded in pairwise, re-numbered
    after each step, so the combined code never exceeds rows².
    """
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        c = pd.factorize(col.to_numpy(), sort=True)[0].astype(np.int64)
        code = np.unique(code * (int(c.max()) + 1 if len(c) else 1) + c, return_inverse=True)[1].reshape(-1)
    return code


def majority_vote(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Majority of each row of an items × values count matrix.

    Returns ``(winner, votes, tie)``: the most frequent value, its count, and whether the top
    count is shared. A tie resolves to the smallest tied value (argmax takes the first maximum),
    so a 1–1 binary split gives 0 (absent / no). Rows with no votes give winner 0, votes 0.
    """
    counts = np.asarray(counts)
    winner = counts.argmax(axis=1)
    votes = counts.max(axis=1)
    tie = (counts == votes[:, None]).sum(axis=1) > 1
    return winner.astype(np.int64), votes.astype(np.int64), tie & (votes > 0)


def vote_counts(item: np.ndarray, value: np.ndarray, n_items: int, n_values: int) -> np.ndarray:
    """items × values matrix of vote counts."""
    flat = np.bincount(item * n_values + value, minlength=n_items * n_values)
    return flat.reshape(n_items, n_values)


def _joined(df: pd.DataFrame, column: str, n_items: int) -> np.ndarray:
    """Per item: sorted unique values of ``column`` joined by ``|``.

    Vectorised over items: the distinct (item, value) pairs are found and ordered on integer
    codes (values factorized in sorted order), laid out items × rank (rank = position in the
    item's sorted values), and the rank columns are concatenated; the loop runs over ranks
    (the largest panel size), never over items.
    """
    codes, uniques = pd.factorize(df[column].to_numpy(), sort=True)
    pairs = np.unique(df["item"].to_numpy(np.int64) * (len(uniques) + 1) + codes)
    item, values = pairs // (len(uniques) + 1), np.asarray(uniques, dtype=object)[pairs % (len(uniques) + 1)]
    rank = np.arange(len(pairs)) - np.searchsorted(item, item, side="left")
    out = np.full(n_items, "", dtype=object)
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        at = rank == r
        prefix = out[item[at]] + "|" if r else out[item[at]]
        out[item[at]] = prefix + values[at]
    return out


def item_table(clean: pd.DataFrame, subset: Subset, flags: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every per-item column of benchmark_labels.csv (unsorted, indexed by item code)."""
    keys = list(subset.item_key)
    n_items = int(clean["item"].max()) + 1 if len(clean) else 0
    first = clean.drop_duplicates("item").sort_values("item")
    items = pd.DataFrame({k: first[k].to_numpy() for k in keys})

    for col in subset.carried_columns:
        items[col] = _joined(clean, col, n_items)
    items["usernames"] = _joined(clean, "username", n_items)

    times = clean[["item"]].copy()
    times["rt"] = clean["reaction_time_ms"].astype(np.float64)
    times["st"] = clean["sample_time_ms"].astype(np.float64)
    g = times.groupby("item", sort=True)
    items["reaction_time_ms_mean"] = g["rt"].mean().to_numpy()
    items["reaction_time_ms_median"] = g["rt"].median().to_numpy()
    items["sample_time_ms_mean"] = g["st"].mean().to_numpy()

    item = clean["item"].to_numpy()
    counts = vote_counts(item, clean["value"].to_numpy(), n_items, len(subset.scale))
    n_raters = counts.sum(axis=1)
    if subset.ordinal:
        win, votes, tie = majority_vote(counts)
        items["majority_rating_int"] = win
        items["majority_rating_votes"] = votes
        items["majority_rating_tie"] = tie
    bcounts = np.stack([counts[:, : subset.present_from].sum(1), counts[:, subset.present_from :].sum(1)], 1)
    bwin, bvotes, btie = majority_vote(bcounts)
    items["majority_present"] = bwin
    items["majority_present_votes"] = bvotes
    items["majority_present_tie"] = btie
    for j, col in enumerate(subset.vote_columns):
        items[col] = counts[:, len(subset.scale) - 1 - j]
    if subset.ordinal:
        items["majority_rating"] = np.asarray(subset.scale, dtype=object)[win]
    several = n_raters >= 2
    items["all_agree_binary"] = several & (bvotes == n_raters)
    if subset.ordinal:
        items["all_agree_ordinal"] = several & (votes == n_raters)
    intended = subset.prior_present(items)
    if subset.intended_column:
        items[subset.intended_column] = intended
    items[subset.prior_match_column] = bwin == intended
    pos, neg = subset.target_words
    unanimous = items["all_agree_binary"].to_numpy()
    items["benchmark_bucket"] = np.select(
        [(bwin == 1) & unanimous, (bwin == 1) & several, (bwin == 0) & unanimous, (bwin == 0) & several, bwin == 1],
        [f"unanimous_{pos}", f"majority_{pos}", f"unanimous_{neg}", f"majority_{neg}", f"single_rater_{pos}"],
        default=f"single_rater_{neg}",
    )
    items["n_raters"] = n_raters
    items["intended"] = intended  # internal: the sampling prior as 0/1, for every subset
    if subset.has_flags:
        items["flagged"] = flagged_mask(items, flags, subset)
    return items


def flagged_mask(items: pd.DataFrame, flags: pd.DataFrame | None, subset: Subset) -> np.ndarray:
    """Whether each item's key (level as a string) appears in flags.csv."""
    if flags is None or len(flags) == 0:
        return np.zeros(len(items), dtype=bool)
    keys = list(subset.item_key)
    return keys_isin(items, flags[keys].astype(str), keys)


def keys_isin(left: pd.DataFrame, right: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Whether each row's ``keys`` tuple of ``left`` occurs in ``right``.

    The rows are narrowed on the first key (one hashed ``isin`` per side) before the tuples are
    compared, so the cost follows the handful of flags, not the tens of thousands of items.
    """
    near_left = left[keys[0]].isin(right[keys[0]]).to_numpy()
    near_right = right[keys[0]].isin(left.loc[near_left, keys[0]]).to_numpy()
    mask = np.zeros(len(left), dtype=bool)
    if near_left.any():
        wanted = pd.MultiIndex.from_frame(right.loc[near_right, keys])
        mask[near_left] = pd.MultiIndex.from_frame(left.loc[near_left, keys]).isin(wanted)
    return mask


def unmatched_flags(items: pd.DataFrame, flags: pd.DataFrame | None, subset: Subset) -> pd.DataFrame:
    """Flags whose item has no label (nobody rated it) [ours]."""
    if flags is None or len(flags) == 0:
        return pd.DataFrame(columns=flags.columns if flags is not None else [])
    return flags[~keys_isin(flags, items, list(subset.item_key))]


def benchmark_labels(items: pd.DataFrame, subset: Subset) -> pd.DataFrame:
    """benchmark_labels.csv: upstream's columns, in its order and sort (string order)."""
    out = items.sort_values(list(subset.label_sort), kind="stable")
    return out[list(subset.label_columns)].reset_index(drop=True)


def slice_table(labels: pd.DataFrame, table: SliceTable) -> pd.DataFrame:
    """A per-slice table: rates are means over all labelled items of the slice."""
    g = labels.groupby(table.key, sort=True)
    out = pd.DataFrame(index=g.size().index)
    for name, source, agg in table.columns:
        if agg == "count":
            out[name] = g[source].size()
        elif agg == "mean":
            out[name] = g[source].mean().astype(np.float64)
        elif agg == "first":
            out[name] = g[source].first()
        else:
            raise ValueError(f"unknown aggregation {agg!r}")
    out = out.reset_index()
    # every remaining tie is broken by the key ascending [ours]
    by = [c for c, _ in table.sort] + [table.key]
    asc = [a for _, a in table.sort] + [True]
    return out.sort_values(by, ascending=asc, kind="stable").reset_index(drop=True)


def incomplete_items(items: pd.DataFrame, subset: Subset, panel: int) -> pd.DataFrame:
    """Items not rated by all ``panel`` raters present (the complete items' count), by count then
    key."""
    keys = list(subset.item_key)
    out = items.loc[items["n_raters"] != panel, [*keys, "n_raters", "usernames"]]
    out = out.rename(columns={"n_raters": "ratings_observed"})
    return out.sort_values(["ratings_observed", *keys], kind="stable").reset_index(drop=True)
