"""Rater profiles: how each annotator rates, how fast, and how far they agree with the others.

One row per rater (``raters.csv``), from the cleaned votes (each rater's latest vote per item):

* ``items_rated``; ``share_present`` = share of their votes that are present / yes;
* ``loo_comparisons`` and ``agreement_with_others_majority`` = the leave-one-out accuracy of
  their votes alone: on items with ≥3 votes, their vote against the majority of the other
  votes (others tied: skipped); undefined without such a comparison;
* ``median_reaction_time_ms``, ``share_under_1s`` (reaction time < 1,000 ms);
  ``share_faster_than_clip`` (reaction time < the clip's duration) over the votes whose clip
  duration is known (``clip_duration_known``), undefined when none is;
* ``kappa_binary_vs_<rater>``: Cohen's κ (binary) with each other rater on every item both
  rated; undefined with no shared item or chance agreement 1;
* ``flagged`` and ``flag_reasons`` by :data:`FLAG_RULE`. Nothing is excluded automatically.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

FAST_MS = 1000.0
MIN_COMPARISONS = 30
# a rater with fewer ratings is profiled but never pointed out, nor counted in the others' medians:
# a share over a handful of votes says more about chance than about the rater
MIN_RATINGS = 30
FLAG_RULE = (
    f"a rater with at least {MIN_RATINGS} ratings is pointed out when (a) their median reaction time is under "
    "1 s or more than half of their ratings take under 1 s; or (b) their share of present/yes votes differs by "
    "more than 0.20 from the median of the other raters' (those with at least "
    f"{MIN_RATINGS} ratings); or (c) their agreement with the others' majority is more than 0.10 below "
    f"the median of the other raters' (each with at least {MIN_COMPARISONS} comparisons)"
)


def _share(mask: np.ndarray) -> float | None:
    return float(mask.mean()) if len(mask) else None


def rater_profiles(clean: pd.DataFrame, votes: pd.DataFrame, raters: list[str],
                   clip_ms: np.ndarray | None = None) -> pd.DataFrame:
    """The profile table (module docstring). ``clean`` and ``votes`` are row-aligned (the cleaned
    annotations and their integer form); ``clip_ms`` gives each item's clip duration in ms
    (NaN when unknown), indexed by item code."""
    from .agreement import co_rated_pairs, kappas_from_tables, loo_comparisons, pair_tables

    rater = votes["rater"].to_numpy(np.int64)
    binary = votes["binary"].to_numpy(np.int64)
    rt = clean["reaction_time_ms"].to_numpy(dtype=np.float64)
    clip = (np.asarray(clip_ms, dtype=np.float64)[votes["item"].to_numpy(np.int64)] if clip_ms is not None
            else np.full(len(votes), np.nan))
    comp = loo_comparisons(votes)
    a, b, tables = pair_tables(co_rated_pairs(votes), "binary", 2)
    kappa = {(i, k): kappas_from_tables(t) for i, k, t in zip(a.tolist(), b.tolist(), tables, strict=True)}
    rows = []
    for r, name in enumerate(raters):
        mine = rater == r
        c = comp[comp["rater"] == r]
        known = mine & np.isfinite(clip)
        row = {
            "rater": name,
            "items_rated": int(mine.sum()),
            "share_present": _share(binary[mine] == 1),
            "loo_comparisons": int(len(c)),
            "agreement_with_others_majority": _share((c["truth"] == c["pred"]).to_numpy()),
            "median_reaction_time_ms": float(np.median(rt[mine])) if mine.any() else None,
            "share_under_1s": _share(rt[mine] < FAST_MS),
            "clip_duration_known": int(known.sum()),
            "share_faster_than_clip": _share(rt[known] < clip[known]),
        }
        for o, other in enumerate(raters):  # a column per rater, in rater order; none with oneself
            k = kappa.get((min(r, o), max(r, o))) if o != r else None
            row[f"kappa_binary_vs_{other}"] = float(k) if k is not None and np.isfinite(k) else None
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        table["flagged"], table["flag_reasons"] = zip(*[flag(table, i) for i in range(len(table))], strict=True)
    return table


def flag(table: pd.DataFrame, i: int) -> tuple[bool, str]:
    """Whether rater ``i`` is far from the others by :data:`FLAG_RULE`, and why."""
    me, others = table.iloc[i], table.drop(index=table.index[i])
    if me["items_rated"] < MIN_RATINGS:
        return False, ""
    others = others[others["items_rated"] >= MIN_RATINGS]
    reasons = []
    if me["median_reaction_time_ms"] is not None and (me["median_reaction_time_ms"] < FAST_MS or (me["share_under_1s"] or 0) > 0.5):
        reasons.append(f"fast: median {me['median_reaction_time_ms']:,.0f} ms, {100 * me['share_under_1s']:.0f} % of "
                       "ratings under 1 s")
    shares = others["share_present"].dropna()
    if me["share_present"] is not None and len(shares) and abs(me["share_present"] - shares.median()) > 0.20:
        reasons.append(f"present share {me['share_present']:.2f} vs the others' median {shares.median():.2f}")
    comparable = others[(others["loo_comparisons"] >= MIN_COMPARISONS)]["agreement_with_others_majority"].dropna()
    if (me["loo_comparisons"] >= MIN_COMPARISONS and me["agreement_with_others_majority"] is not None and len(comparable)
            and me["agreement_with_others_majority"] < comparable.median() - 0.10):
        reasons.append(f"agreement with the others' majority {me['agreement_with_others_majority']:.2f} vs the others' "
                       f"median {comparable.median():.2f}")
    return bool(reasons), "; ".join(reasons)


def clip_durations_ms(items: pd.DataFrame, subset, dataset_root: Path) -> np.ndarray:
    """Each item's clip duration in ms (NaN when unknown), indexed by item code: from a sidecar
    ``<clip>.json`` holding ``{"duration": seconds}`` next to the clip, else from the audio file's
    header (soundfile, when installed), else unknown."""
    root = Path(dataset_root)
    paths = subset.audio_paths(items, root) if len(items) else pd.Series(dtype=object)
    out = np.full(len(items), np.nan)
    seen: dict[str, float] = {}
    for i, rel in enumerate(paths.tolist()):
        if rel is None or rel != rel:
            continue
        if rel not in seen:
            seen[rel] = _duration_ms(root / rel)
        out[i] = seen[rel]
    return out


def _duration_ms(clip: Path) -> float:
    sidecar = clip.with_suffix(".json")
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        seconds = float(meta["duration"])
        if np.isfinite(seconds) and seconds > 0:
            return 1000.0 * seconds
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        import soundfile

        info = soundfile.info(str(clip))
        return 1000.0 * info.frames / info.samplerate if info.samplerate else float("nan")
    except Exception:  # noqa: BLE001 - soundfile missing or the file unreadable: unknown
        return float("nan")
