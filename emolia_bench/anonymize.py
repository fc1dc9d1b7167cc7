"""Replace annotator names by stable ``user_<i>`` ids (README: “1. anonymize.py”)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .io import InputError, load_annotations, load_flags, load_users, read_csv_strings
from .outputs import csv_bytes
from .subsets import Subset

MAP_FILE = "_anon_map.csv"
ANON_RE = re.compile(r"user_(\d+)")


@dataclass
class AnonymizedSubset:
    subset: Subset
    files: dict[str, bytes]  # output file name -> bytes
    mapping: pd.DataFrame  # raw_username, anon_username (the whole map, old and new)
    counts: dict[str, int]


def load_map(path: Path) -> dict[str, str]:
    """The existing raw -> anon map, validated; {} when there is none yet."""
    if not path.exists():
        return {}
    df = read_csv_strings(path, ("raw_username", "anon_username"), allow_no_rows=True)
    for col in ("raw_username", "anon_username"):
        dup = df[col].duplicated()
        if dup.any():
            i = int(dup.to_numpy().nonzero()[0][0])
            raise InputError(path, f"{df[col].iloc[i]!r} appears twice; expected a one-to-one map", row=i + 1, column=col)
    bad = ~df["anon_username"].str.fullmatch(ANON_RE.pattern)
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raise InputError(path, f"unexpected id {df['anon_username'].iloc[i]!r}; expected user_<number>", row=i + 1, column="anon_username")
    return dict(zip(df["raw_username"], df["anon_username"], strict=True))


def extend_map(existing: dict[str, str], names: set[str]) -> dict[str, str]:
    """Keep every existing id; give new names the numbers after the highest id ever issued,
    in sorted order of the new names. On a first run this is plain sorted order (= upstream).

    Gaps are never refilled: an id that once belonged to someone is never given to another.
    """
    mapping = dict(existing)
    used = [int(ANON_RE.fullmatch(v).group(1)) for v in mapping.values()]
    nxt = max(used) + 1 if used else 0
    for name in sorted(names - mapping.keys()):
        mapping[name] = f"user_{nxt}"
        nxt += 1
    return mapping


# Columns that cannot carry a name: closed vocabularies, numbers, timestamps, system ids, and
# the username itself (already replaced). A raw username that happens to equal one of their
# values (a rater called "no", the rating) identifies no one there and must not block the run.
# Every other column — file names, free-text flag reasons, users' free-text fields, any extra
# column — is searched.
NAMELESS_COLUMNS = frozenset({
    "username", "rating", "created_at", "reaction_time_ms", "sample_time_ms", "annotation_id", "flag_id",
    "is_active", "is_admin", "onboarded", "annotation_count", "age", "consent",
    "source_emotion", "queried_emotion", "task_type", "dimension", "level", "polarity",
})


def _folded(text: str) -> str:
    """Text as names are compared: Unicode-normalised (NFKC: full-width and compatibility
    letters become plain ones) and case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def find_leak(frames: dict[str, pd.DataFrame], raw_names: list[str]) -> tuple[str, int, str, str] | None:
    """First (file, row, column, name) where a raw name occurs in an output cell.

    A name counts wherever it stands between non-letters — ``Alice_rec.mp3``, ``Alice2``,
    ``bob_k``, "ask Maria" are caught, "Marianne" does not trip "Maria" — compared after NFKC
    normalisation, ignoring case. Columns in :data:`NAMELESS_COLUMNS` are not searched. Names that
    already look like anonymous ids (``user_3``) identify no one and are skipped.
    """
    names = sorted({_folded(n) for n in raw_names if n and not ANON_RE.fullmatch(n)}, key=len, reverse=True)
    if not names:
        return None
    letter = r"[^\W\d_]"  # a letter of any script: a word character that is not a digit or _
    pattern = re.compile(rf"(?<!{letter})(?:" + "|".join(re.escape(n) for n in names) + rf")(?!{letter})")
    for fname, df in frames.items():
        for col in df.columns:
            if col in NAMELESS_COLUMNS:
                continue
            folded = df[col].astype(str).map(_folded)
            hits = folded.str.contains(pattern, regex=True)
            if hits.any():
                i = int(hits.to_numpy().nonzero()[0][0])
                return fname, i + 1, col, pattern.search(folded.iloc[i]).group(0)
    return None


def load_raw(raw_dir: Path, subset: Subset) -> dict[str, pd.DataFrame]:
    """One raw subset folder's files, validated: file name -> frame."""
    frames = {"annotations.csv": load_annotations(raw_dir / "annotations.csv", subset),
              "users.csv": load_users(raw_dir / "users.csv")}
    if subset.has_flags:
        frames["flags.csv"] = load_flags(raw_dir / "flags.csv", subset)
    return frames


def raw_names(frames: dict[str, pd.DataFrame]) -> set[str]:
    """Every username in a subset's raw files."""
    return set().union(*(set(df["username"]) for df in frames.values()))


def anonymize_subset(raw_dir: Path, subset: Subset, frames: dict[str, pd.DataFrame],
                     searched: set[str] = frozenset()) -> AnonymizedSubset:
    """Compute one subset's anonymized files from its raw ``frames`` (:func:`load_raw`); nothing
    is written. Its own names are replaced; they and ``searched`` (the other subsets' annotators:
    an emo-only annotator's name in a dim flag reason identifies them too) must not remain in
    any output cell."""
    ann, users, flags = frames["annotations.csv"], frames["users.csv"], frames.get("flags.csv")
    existing = load_map(raw_dir / MAP_FILE)
    names = raw_names(frames)
    mapping = extend_map(existing, names)

    out = {}
    for fname, df in frames.items():
        df = df.copy()
        df["username"] = df["username"].map(mapping)
        out[fname] = df

    leak = find_leak(out, sorted(names | set(searched)))
    if leak is not None:
        fname, row, col, name = leak
        raise InputError(
            raw_dir / fname,
            f"a raw annotator name ({name!r}) would reach the anonymized output; remove it from "
            "the free text and re-run (nothing was written)",
            row=row,
            column=col,
        )

    map_df = pd.DataFrame(
        sorted(mapping.items(), key=lambda kv: int(kv[1].split("_")[1])),
        columns=["raw_username", "anon_username"],
    )
    counts = {
        "annotations": len(ann),
        "users": len(users),
        "flags": 0 if flags is None else len(flags),
        "annotators": len(names),
        "new_ids": len(mapping) - len(existing),
    }
    return AnonymizedSubset(subset, {k: csv_bytes(v) for k, v in out.items()}, map_df, counts)
