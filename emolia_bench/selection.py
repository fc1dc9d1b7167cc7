"""Which labelled items a benchmark run scores, and what it sends for each (README: “3. benchmark.py”: filters and prompts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .io import InputError, load_rubric
from .paths import clip_problems
from .subsets import Subset


def limit_rows(kept: pd.DataFrame, limit: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """A seeded random sample of ``limit`` rows (``--limit``), clip by clip: the distinct clips
    (file names, sorted) are put in a random order drawn from ``seed``, their rows are taken in
    that order until ``limit`` rows, and the sample keeps the labels' order. Not the first rows:
    labels are sorted by task type and slice, so a head would hold one kind of item only.
    Returns the rows and the record of how they were drawn."""
    record = {"rows": int(limit), "seed": int(seed), "unit": "clip (file_name)", "of": int(len(kept))}
    if limit >= len(kept):
        return kept, record
    files = np.sort(kept["file_name"].unique())
    position = pd.Series(np.random.default_rng(seed).permutation(len(files)), index=files)
    order = kept["file_name"].map(position).sort_values(kind="stable").index
    return kept.loc[np.sort(order[:limit])].reset_index(drop=True), record


@dataclass(frozen=True)
class Filters:
    min_raters: int = 1
    exclude_flagged: bool = False
    unanimous_only: bool = False

    def mode_name(self, subset: Subset) -> str:
        """A readable name for the filter combination, as upstream prints it."""
        flags_ok = self.exclude_flagged or not subset.has_flags
        if self.min_raters <= 1 and not self.exclude_flagged and not self.unanimous_only:
            return "all (every item, single-rater allowed, flags allowed)"
        if self.min_raters == 2 and flags_ok and not self.unanimous_only:
            return "stronger-evidence (≥2 raters, no flags)"
        if self.unanimous_only and self.min_raters <= 2 and not self.exclude_flagged:
            return "unanimous-only (≥2 raters, all agree)"
        # unanimity needs two raters, so the effective floor is at least 2 then
        parts = [f"≥{max(self.min_raters, 2 if self.unanimous_only else 1)} raters", "no flags" if self.exclude_flagged else "flags allowed",
                 "unanimous only" if self.unanimous_only else "any agreement"]
        return f"custom ({', '.join(parts)})"


def apply_filters(labels: pd.DataFrame, f: Filters) -> tuple[pd.DataFrame, dict]:
    """Filters in the README's order: min raters, flags, unanimity. Returns kept rows and stats."""
    stats = {"input": int(len(labels))}
    kept = labels[labels["n_raters"] >= f.min_raters]
    stats["dropped_below_min_raters"] = int(len(labels) - len(kept))
    n = len(kept)
    if f.exclude_flagged:
        kept = kept[~kept["flagged"].astype(bool)]
    stats["dropped_flagged"] = int(n - len(kept))
    n = len(kept)
    if f.unanimous_only:
        kept = kept[kept["all_agree_binary"]]
    stats["dropped_non_unanimous"] = int(n - len(kept))
    stats["kept"] = int(len(kept))
    return kept.reset_index(drop=True), stats


def template_prompts(rows: pd.DataFrame, subset: Subset, dataset_root: Path,
                     templates: list[str] | None) -> list[pd.Series]:
    """Each row's prompt under each template (one Series per template): the first is the
    ``prompt`` column :func:`build_rows` filled with ``templates[0]``, the others are filled
    here (the rubric is read again only then)."""
    if not templates or len(templates) == 1 or not len(rows):
        return [rows["prompt"]] * max(1, len(templates or []))
    rubric = load_rubric(Path(dataset_root) / subset.rubric_file) if subset.rubric_file else None
    return [rows["prompt"], *(subset.prompt(rows, rubric, t) for t in templates[1:])]


def build_rows(kept: pd.DataFrame, subset: Subset, dataset_root: Path, template: str | None = None) -> pd.DataFrame:
    """Add ``prompt`` (under ``template``; default upstream's), ``audio_path`` (relative to the dataset root; None when the clip is
    missing), ``item_stem``, ``clip`` (the unit the bootstrap resamples), ``audio_error`` (why a
    found clip may not be read: not a regular file, or a link leading out of the root),
    ``scorable`` (a clip that may be read) and ``sampling_prior`` (+1 where the item was sampled
    to be present, −1 otherwise)."""
    if Path(dataset_root).exists() and not Path(dataset_root).is_dir():
        raise InputError(dataset_root, "is not a folder; expected --dataset-root to be the folder holding "
                                       f"{subset.name}/ and its clips")
    rubric = load_rubric(Path(dataset_root) / subset.rubric_file) if subset.rubric_file else None
    rows = kept.copy()
    rows["prompt"] = subset.prompt(rows, rubric, template) if len(rows) else pd.Series(dtype=object)
    rows["audio_path"] = subset.audio_paths(rows, Path(dataset_root)) if len(rows) else pd.Series(dtype=object)
    rows["item_stem"] = subset.sham_stem(rows) if len(rows) else pd.Series(dtype=object)
    rows["clip"] = clip_ids(rows["audio_path"], rows["item_stem"])
    # only regular files inside the dataset root are scored, whatever the scorer (a FIFO named
    # like a clip would hang a reader; a link leading out would send a foreign file's bytes)
    problems = clip_problems(dataset_root, pd.unique(rows["audio_path"].dropna()))
    rows["audio_error"] = rows["audio_path"].map(problems) if len(rows) else pd.Series(dtype=object)
    rows["scorable"] = rows["audio_path"].notna() & rows["audio_error"].isna()
    rows["sampling_prior"] = (subset.prior_present(rows) * 2 - 1).astype("float64")
    return rows


def clip_ids(audio_path: pd.Series, item_stem: pd.Series) -> pd.Series:
    """The clip each row belongs to — the unit every bootstrap over a model's rows resamples,
    so that all rows of one clip enter or leave a resample together: the clip's file when it
    was found (``audio_path``; missing as None, NaN or ""), else the item's stem, which names
    the clip the item expects."""
    found = audio_path.notna() & (audio_path.astype(object) != "")
    return audio_path.where(found, item_stem)
