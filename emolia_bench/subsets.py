"""The two subsets, each described once, as data.

Every stage (loading, labels, agreement, prompts, audio lookup, metrics, reports) reads what
it needs from a :class:`Subset` and never branches on a subset's name, so a third subset is one
new description here. The few rules that are code (prompt text, audio path, sham stem) are
small named functions referenced from the description.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .defaults import SUBSET_NAMES

# Columns every annotations.csv has, whatever the subset.
COMMON_ANNOTATION_COLUMNS = (
    "annotation_id",
    "username",
    "file_name",
    "rating",
    "reaction_time_ms",
    "sample_time_ms",
    "created_at",
)
USERS_COLUMNS = (
    "username",
    "is_active",
    "is_admin",
    "onboarded",
    "annotation_count",
    "created_at",
    "age",
    "languages",
    "gender",
    "consent",
    "degree",
    "expertise",
    "listening_setup",
)
FLAGS_COLUMNS = (
    "flag_id",
    "username",
    "dimension",
    "level",
    "polarity",
    "file_name",
    "reason",
    "created_at",
)


@dataclass(frozen=True)
class SliceTable:
    """A per-slice summary table of the analysis stage.

    ``columns`` maps an output column to ``(source column, aggregation)`` where aggregation is
    ``"count"``, ``"mean"`` or ``"first"``; ``sort`` is a list of ``(column, ascending)``; the
    slice key ascending breaks every remaining tie.
    """

    file: str
    key: str
    columns: tuple[tuple[str, str, str], ...]
    sort: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class Subset:
    name: str
    #: columns that identify one item (one question asked about one clip)
    item_key: tuple[str, ...]
    #: extra annotation columns beyond COMMON_ANNOTATION_COLUMNS and the key
    extra_annotation_columns: tuple[str, ...]
    #: rating labels in ordinal order: the label's position is its integer value
    scale: tuple[str, ...]
    #: binary target: present/yes iff rating value >= present_from
    present_from: int
    #: words used in bucket names for the binary target (positive, negative)
    target_words: tuple[str, str]
    #: closed vocabularies validated at load time
    categories: dict[str, tuple[str, ...]]
    #: the sampling prior: items whose prior_column is in prior_positive were sampled as positive
    prior_column: str
    prior_positive: tuple[str, ...]
    #: name of the majority-vs-prior column, and of the prior column itself (None: not written)
    prior_match_column: str
    intended_column: str | None
    #: annotation columns summarised per item as their sorted unique values joined by "|"
    carried_columns: tuple[str, ...]
    #: output columns of benchmark_labels.csv, in order, and its sort
    label_columns: tuple[str, ...]
    label_sort: tuple[str, ...]
    #: analysis slice tables, and how summary.json names rates and tables
    slice_tables: tuple[SliceTable, ...]
    #: summary.json keys of the share of items with a positive majority, and of the share whose
    #: majority matches the sampling prior (``prior_match_column``)
    positive_rate_key: str
    prior_match_rate_key: str
    #: (summary key, slice table file, which rows: all | first5 | last5, the report's heading for
    #: them and a sentence saying what they rank)
    summary_tables: tuple[tuple[str, str, str, str, str], ...]
    #: benchmark slices: the coarse "type" column and the fine "category" column
    type_slice: str
    category_slice: str
    #: optional inputs
    has_flags: bool
    rubric_file: str | None
    #: prompts: a format string with one field (``{emotion}``, ``{rubric}``); upstream's prompt is
    #: ``default_template``; ``--prompt-template`` may name others
    template_field: str
    default_template: str
    #: rules that are code
    template_value: Callable[[pd.DataFrame, dict | None], pd.Series] = field(repr=False)
    audio_paths: Callable[[pd.DataFrame, Path], pd.Series] = field(repr=False)
    sham_stem: Callable[[pd.DataFrame], pd.Series] = field(repr=False)
    #: where a clip belongs when its path follows from the item (None: found by search only);
    #: predictions.csv names it for a missing clip, as upstream does
    expected_audio_paths: Callable[[pd.DataFrame], pd.Series] | None = field(default=None, repr=False)

    @property
    def ordinal(self) -> bool:
        """More than two rating levels: ordinal agreement figures are computed too."""
        return len(self.scale) > 2

    @property
    def annotation_columns(self) -> tuple[str, ...]:
        cols = list(COMMON_ANNOTATION_COLUMNS)
        for c in self.extra_annotation_columns + self.item_key:
            if c not in cols:
                cols.append(c)
        return tuple(cols)

    @property
    def vote_columns(self) -> tuple[str, ...]:
        """Per-level vote count columns, highest level first (``strongly_present_votes``...)."""
        return tuple(f"{label}_votes" for label in reversed(self.scale))

    def rating_value(self, label: str) -> int:
        return self.scale.index(label)

    def prior_present(self, frame: pd.DataFrame) -> np.ndarray:
        """The sampling prior as a 0/1 decision per row: 1 where ``prior_column`` holds a value of
        ``prior_positive`` (the item was sampled to be present)."""
        return frame[self.prior_column].isin(self.prior_positive).to_numpy().astype(np.int64)

    def prompt(self, items: pd.DataFrame, rubric: dict | None, template: str | None = None) -> pd.Series:
        """Each item's prompt: ``template`` (default: upstream's) with the item's value of
        ``template_field`` filled in (formatted once per distinct value)."""
        template = self.default_template if template is None else template
        values = self.template_value(items, rubric)
        filled = {v: template.format(**{self.template_field: v}) for v in pd.unique(values)}
        return values.map(filled).astype(object)


# ---------------------------------------------------------------------------------------------
# rules that are code


def emotion_label(queried_emotion: pd.Series) -> pd.Series:
    """``Jealousy___Envy`` -> ``Jealousy / Envy``; ``Sexual_Lust`` -> ``Sexual Lust``."""
    return queried_emotion.str.replace("___", " / ", regex=False).str.replace("_", " ").str.strip()


def emo_template_value(items: pd.DataFrame, rubric: dict | None) -> pd.Series:
    """``{emotion}``: the queried emotion as words (:func:`emotion_label`)."""
    return emotion_label(items["queried_emotion"])


def dim_template_value(items: pd.DataFrame, rubric: dict | None) -> pd.Series:
    """``{rubric}``: the rubric paragraph of the item's dimension and level, with the README's
    fallbacks (“3. benchmark.py”: prompts) (upstream's prompt is this text alone)."""
    rubric = rubric or {}
    # Unique (dimension, level) pairs are few; resolve each once.
    pairs = items[["dimension", "level"]].drop_duplicates()
    text = {}
    for dim, level in pairs.itertuples(index=False):
        entry = rubric.get(dim)
        if not isinstance(entry, dict):
            text[(dim, level)] = f"Speech audio matching the description of {dim} at level {level}."
            continue
        levels = entry.get("levels") or {}
        paragraph = levels.get(level) if isinstance(levels, dict) else None
        if isinstance(paragraph, str) and paragraph.strip():
            text[(dim, level)] = paragraph
        else:
            short = entry.get("short_description") or dim
            text[(dim, level)] = f"Speech audio expressing the dimension '{short}' at level {level}."
    keys = list(zip(items["dimension"].tolist(), items["level"].tolist(), strict=True))
    return pd.Series([text[k] for k in keys], index=items.index, dtype=object)


def _stem(file_name: pd.Series) -> pd.Series:
    return file_name.str.replace(r"\.[^./\\]*$", "", regex=True)


def emo_sham_stem(items: pd.DataFrame) -> pd.Series:
    return _stem(items["file_name"])


def dim_sham_stem(items: pd.DataFrame) -> pd.Series:
    return (
        _stem(items["file_name"])
        + "__"
        + items["dimension"]
        + "_"
        + items["level"]
        + "_"
        + items["polarity"]
    )


def emo_audio_paths(items: pd.DataFrame, dataset_root: Path) -> pd.Series:
    """Find each clip by stem anywhere under ``<root>/emolia-emo/``.

    ``.mp3`` is preferred over other files with the same stem; among equals the
    lexicographically first relative path wins, so the choice never depends on directory
    listing order. Returns POSIX paths relative to the dataset root, or None when absent.
    """
    base = Path(dataset_root) / "emolia-emo"
    candidates = []  # (not mp3, relative path, stem): one os.walk, no per-file Path objects
    for folder, _dirs, files in os.walk(base):
        rel_folder = os.path.relpath(folder, dataset_root).replace(os.sep, "/")
        for name in files:
            stem, ext = os.path.splitext(name)
            candidates.append((ext.lower() != ".mp3", f"{rel_folder}/{name}", stem))
    index: dict[str, str] = {}
    for _, rel, stem in sorted(candidates):
        index.setdefault(stem, rel)
    found = emo_sham_stem(items).map(index)
    return found.astype(object).where(found.notna(), None)


def dim_expected_paths(items: pd.DataFrame) -> pd.Series:
    """Where each item's clip belongs: ``emolia-dim/data/<dimension>/<level>/<polarity>/<file_name>``."""
    cols = [items[c].tolist() for c in ("dimension", "level", "polarity", "file_name")]
    return pd.Series([f"emolia-dim/data/{d}/{lv}/{p}/{f}" for d, lv, p, f in zip(*cols, strict=True)],
                     index=items.index, dtype=object)


def dim_audio_paths(items: pd.DataFrame, dataset_root: Path) -> pd.Series:
    """:func:`dim_expected_paths` when that file exists, else None."""
    cols = [items[c].tolist() for c in ("dimension", "level", "polarity", "file_name")]
    folders = [f"emolia-dim/data/{d}/{lv}/{p}" for d, lv, p in zip(*cols[:3], strict=True)]
    # one directory listing per distinct <dimension>/<level>/<polarity> folder, not one stat per clip
    present: set[str] = set()
    for folder in set(folders):
        try:
            with os.scandir(Path(dataset_root) / folder) as it:
                present.update(f"{folder}/{e.name}" for e in it if e.is_file())
        except (FileNotFoundError, NotADirectoryError):
            pass
    rel = [f"{folder}/{name}" for folder, name in zip(folders, cols[3], strict=True)]
    return pd.Series([r if r in present else None for r in rel], index=items.index, dtype=object)


# ---------------------------------------------------------------------------------------------
# the descriptions

EMO_TASK_TYPES = ("affirmative", "contrastive_1", "contrastive_2", "penultimate", "ultimate")

PREVALENCE_NOTE = ("Ranked by the share of items with a present majority. That share follows how often the emotion was "
                   "asked about clips sampled to express it (the task type), so this ranks sampling, not how hard "
                   "the emotion is to hear; the agreement per emotion is in the table above.")

EMO = Subset(
    name="emolia-emo",
    item_key=("file_name", "queried_emotion", "task_type"),
    extra_annotation_columns=("source_emotion",),
    scale=("not_present", "weakly_present", "strongly_present"),
    present_from=1,  # weakly counts as present
    target_words=("present", "absent"),
    categories={"task_type": EMO_TASK_TYPES},
    prior_column="task_type",
    prior_positive=("affirmative",),
    prior_match_column="matches_intended_label",
    intended_column="intended_present",
    carried_columns=("source_emotion",),
    label_columns=(
        "file_name",
        "queried_emotion",
        "task_type",
        "source_emotion",
        "usernames",
        "reaction_time_ms_mean",
        "reaction_time_ms_median",
        "sample_time_ms_mean",
        "majority_rating_int",
        "majority_rating_votes",
        "majority_rating_tie",
        "majority_present",
        "majority_present_votes",
        "majority_present_tie",
        "strongly_present_votes",
        "weakly_present_votes",
        "not_present_votes",
        "majority_rating",
        "all_agree_binary",
        "all_agree_ordinal",
        "intended_present",
        "matches_intended_label",
        "benchmark_bucket",
        "n_raters",
    ),
    label_sort=("task_type", "queried_emotion", "file_name"),
    slice_tables=(
        SliceTable(
            file="per_task_type_summary.csv",
            key="task_type",
            columns=(
                ("items", "majority_present", "count"),
                ("intended_present", "intended_present", "first"),
                ("majority_present_rate", "majority_present", "mean"),
                ("preselection_confirm_rate", "matches_intended_label", "mean"),
                ("unanimous_binary_rate", "all_agree_binary", "mean"),
                ("unanimous_ordinal_rate", "all_agree_ordinal", "mean"),
            ),
            sort=(("items", False),),
        ),
        SliceTable(
            file="per_emotion_summary.csv",
            key="queried_emotion",
            columns=(
                ("items", "majority_present", "count"),
                ("majority_present_rate", "majority_present", "mean"),
                ("unanimous_binary_rate", "all_agree_binary", "mean"),
                ("unanimous_ordinal_rate", "all_agree_ordinal", "mean"),
            ),
            sort=(("majority_present_rate", True), ("items", False)),
        ),
    ),
    positive_rate_key="majority_present_rate",
    prior_match_rate_key="preselection_confirm_rate",
    # upstream's "easiest" / "hardest" emotions are those with the most / fewest present
    # majorities: a ranking of how the emotions were sampled (prevalence), not of how hard they are
    summary_tables=(
        ("task_types", "per_task_type_summary.csv", "all", "Task types", ""),
        ("easiest_emotions", "per_emotion_summary.csv", "last5",
         "The 5 emotions most often judged present (upstream's `easiest_emotions`)", PREVALENCE_NOTE),
        ("hardest_emotions", "per_emotion_summary.csv", "first5",
         "The 5 emotions least often judged present (upstream's `hardest_emotions`)", PREVALENCE_NOTE),
    ),
    type_slice="task_type",
    category_slice="queried_emotion",
    has_flags=False,
    rubric_file=None,
    template_field="emotion",
    default_template="Speech audio in which the speaker expresses or conveys {emotion}.",
    template_value=emo_template_value,
    audio_paths=emo_audio_paths,
    sham_stem=emo_sham_stem,
)

DIM = Subset(
    name="emolia-dim",
    item_key=("file_name", "dimension", "level", "polarity"),
    extra_annotation_columns=(),
    scale=("no", "yes"),
    present_from=1,
    target_words=("yes", "no"),
    categories={"polarity": ("positive", "negative")},
    prior_column="polarity",
    prior_positive=("positive",),
    prior_match_column="matches_intended_polarity",
    intended_column=None,
    carried_columns=(),
    label_columns=(
        "file_name",
        "dimension",
        "level",
        "polarity",
        "usernames",
        "reaction_time_ms_mean",
        "reaction_time_ms_median",
        "sample_time_ms_mean",
        "majority_present",
        "majority_present_votes",
        "majority_present_tie",
        "yes_votes",
        "no_votes",
        "all_agree_binary",
        "matches_intended_polarity",
        "benchmark_bucket",
        "n_raters",
        "flagged",
    ),
    label_sort=("dimension", "level", "polarity", "file_name"),
    slice_tables=(
        SliceTable(
            file="per_dimension_summary.csv",
            key="dimension",
            columns=(
                ("items", "majority_present", "count"),
                ("majority_yes_rate", "majority_present", "mean"),
                ("unanimous_rate", "all_agree_binary", "mean"),
                ("polarity_match_rate", "matches_intended_polarity", "mean"),
            ),
            sort=(("items", False),),
        ),
        SliceTable(
            file="per_polarity_summary.csv",
            key="polarity",
            columns=(
                ("items", "majority_present", "count"),
                ("majority_yes_rate", "majority_present", "mean"),
                ("unanimous_rate", "all_agree_binary", "mean"),
            ),
            sort=(),
        ),
    ),
    positive_rate_key="majority_yes_rate",
    prior_match_rate_key="polarity_match_rate",
    summary_tables=(
        ("dimensions", "per_dimension_summary.csv", "all", "Dimensions", ""),
        ("polarities", "per_polarity_summary.csv", "all", "Polarities", ""),
    ),
    type_slice="polarity",
    category_slice="dimension",
    has_flags=True,
    rubric_file="emolia-dim/variables.json",
    template_field="rubric",
    default_template="{rubric}",
    template_value=dim_template_value,
    audio_paths=dim_audio_paths,
    sham_stem=dim_sham_stem,
    expected_audio_paths=dim_expected_paths,
)

SUBSETS: dict[str, Subset] = {s.name: s for s in (EMO, DIM)}
# the scripts offer defaults.SUBSET_NAMES without importing this module (fast --help)
assert tuple(SUBSETS) == SUBSET_NAMES, "defaults.SUBSET_NAMES must name exactly the subsets described here"


def resolve_subsets(names: list[str] | str) -> list[Subset]:
    """``both`` / ``all`` or a list of subset names -> descriptions, in the given order."""
    if isinstance(names, str):
        names = [names]
    out: list[Subset] = []
    for name in names:
        if name in ("both", "all"):
            out.extend(s for s in SUBSETS.values() if s not in out)
        elif name in SUBSETS:
            if SUBSETS[name] not in out:
                out.append(SUBSETS[name])
        else:
            raise ValueError(f"unknown subset {name!r}; expected one of {', '.join(SUBSETS)} or both")
    return out


def subsets_to_run(names: list[str] | str, root: Path, needed: str) -> list[Subset]:
    """The subsets a stage runs on.

    Subsets named explicitly always run. ``both`` (the default) means every subset that has a
    ``<root>/<subset>/`` folder, so a root that holds one subset — a team that annotates only
    emolia-dim — just works; inside a subset's folder a missing ``needed`` file (or any other)
    is still an error naming it, and a root holding neither subset is bad input.
    """
    from .errors import InputError

    names = [names] if isinstance(names, str) else list(names)
    explicit = [n for n in names if n not in ("both", "all")]
    chosen = resolve_subsets(names)
    if len(explicit) == len(names):
        return chosen
    named = resolve_subsets(explicit) if explicit else []
    present = [sub for sub in chosen if sub in named or (Path(root) / sub.name).is_dir()]
    if not present:
        expected = " or ".join(f"{sub.name}/{needed}" for sub in SUBSETS.values())
        if not Path(root).exists():
            raise InputError(root, f"folder not found; expected a folder holding {expected}")
        raise InputError(root, f"no subset folder found in it (not found: {expected})")
    return present
