"""Replace annotator names by stable ``user_<i>`` ids (README: “1. anonymize.py”)."""

from __future__ import annotations

import re
import unicodedata
import warnings
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


# Every column of every file is either checked against the closed form it may hold — and then a
# cell of that form is not searched — or searched for names. A cell that does not have its
# column's form is searched like free text. A raw username that happens to equal a value of a
# closed form (a rater called "no", the rating) identifies no one there and does not block the run.
NUMBER = r"-?\d+(?:\.\d+)?"
BOOLEAN = r"(?i:true|false|yes|no|0|1)"
TIMESTAMP = r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
CLOSED_FORMS = {
    "created_at": TIMESTAMP, "reaction_time_ms": NUMBER, "sample_time_ms": NUMBER, "annotation_count": NUMBER,
    "age": NUMBER, "is_active": BOOLEAN, "is_admin": BOOLEAN, "onboarded": BOOLEAN, "consent": BOOLEAN,
}
# The task's own words (emotions, dimensions, levels): a value that several annotators' rows carry
# is the task's vocabulary, not a person ("Joy" as an emotion, even with a rater called Joy); a
# value only one annotator's rows carry is searched like free text.
VOCABULARY_COLUMNS = ("queried_emotion", "source_emotion", "dimension", "level")
VOCABULARY_MIN_RATERS = 2


def closed_forms(subset: Subset) -> dict[str, str]:
    """Column -> the regular expression its cells must match in full not to be searched: the
    fixed forms above, the rating scale and the subset's closed vocabularies."""
    forms = dict(CLOSED_FORMS)
    forms["rating"] = "|".join(map(re.escape, subset.scale))
    for col, allowed in subset.categories.items():
        forms[col] = "|".join(map(re.escape, allowed))
    return forms


def vocabulary(annotations: pd.DataFrame) -> dict[str, set[str]]:
    """Per vocabulary column, the values that rows of at least :data:`VOCABULARY_MIN_RATERS`
    distinct raters carry."""
    out = {}
    for col in VOCABULARY_COLUMNS:
        if col in annotations.columns:
            raters = annotations.groupby(col)["username"].nunique()
            out[col] = set(raters.index[raters >= VOCABULARY_MIN_RATERS])
    return out


def _folded(text: str) -> str:
    """Text as names are compared: Unicode-normalised (NFKC: full-width and compatibility
    letters become plain ones) and case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def name_pattern(raw_names: list[str]) -> re.Pattern | None:
    """One expression matching any of the names between non-letters, in any case, in any of the
    look-alike spellings Unicode lists for their letters (TR39 confusables, through the
    ``confusables`` package: a Cyrillic ``М`` for a Latin ``M``); None without names. Names that
    already look like anonymous ids (``user_3``) identify no one and are left out."""
    with warnings.catch_warnings():  # its source has an invalid escape, which Python warns of on compiling
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        import confusables  # a 2.7 MB table: loaded only when anonymizing

    names = sorted({_folded(n) for n in raw_names if n and not ANON_RE.fullmatch(n)}, key=len, reverse=True)
    if not names:
        return None
    letter = r"[^\W\d_]"  # a letter of any script: a word character that is not a digit or _
    spellings = "|".join(confusables.confusable_regex(n) for n in names)
    return re.compile(rf"(?<!{letter})(?:{spellings})(?!{letter})", re.IGNORECASE)


def find_leak(frames: dict[str, pd.DataFrame], raw_names: list[str], subset: Subset,
              words: dict[str, set[str]] | None = None) -> tuple[str, int, str, str] | None:
    """First (file, row, column, text) where a raw name occurs in an output cell.

    A name counts wherever it stands between non-letters — ``Alice_rec.mp3``, ``Alice2``,
    ``bob_k``, "ask Maria" are caught, "Marianne" does not trip "Maria" — compared after NFKC
    normalisation, ignoring case, in any look-alike spelling (:func:`name_pattern`). Every column
    is searched except ``username`` (replaced) and cells of their column's closed form
    (:func:`closed_forms`) or vocabulary (``words``, :func:`vocabulary`).
    """
    pattern = name_pattern(raw_names)
    if pattern is None:
        return None
    forms, words = closed_forms(subset), words or {}
    for fname, df in frames.items():
        for col in df.columns:
            if col == "username":
                continue
            cells = df[col].astype(str)
            searched = ~cells.str.fullmatch(forms[col]) if col in forms else pd.Series(True, index=cells.index)
            if col in words:
                searched &= ~cells.isin(words[col])
            hits = searched & cells.map(_folded).str.contains(pattern, regex=True)
            if hits.any():
                i = int(hits.to_numpy().nonzero()[0][0])
                return fname, i + 1, col, pattern.search(_folded(cells.iloc[i])).group(0)
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

    leak = find_leak(out, sorted(names | set(searched)), subset, vocabulary(ann))
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
