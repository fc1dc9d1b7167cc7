"""Reading at the boundary: loaders that validate every input a later stage relies on.

A loader raises :class:`InputError` naming the file, the row and the column; the CLI turns that
into one line on stderr and exit code 2. Every value is read as a string (``level`` stays
``"3"``, never ``3``). Writing is :mod:`emolia_bench.outputs`.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import io
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError
from .subsets import FLAGS_COLUMNS, SUBSETS, USERS_COLUMNS, Subset

__all__ = ["InputError"]  # re-exported: loaders raise it

CREATED_AT_RE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"


# ---------------------------------------------------------------------------------------------
# CSV


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")  # a leading BOM is accepted and dropped
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        column = None
        header = data.split(b"\n", 1)[0].decode("utf-8", "replace").strip("\r\ufeff").split(",")
        line_start = data.rfind(b"\n", 0, e.start) + 1
        field_index = data[line_start : e.start].count(b",")
        if line > 1 and field_index < len(header):
            column = header[field_index]
        row = line - 1 if line > 1 else None
        raise InputError(
            path,
            f"is not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "expected a UTF-8 encoded CSV file",
            row=row,
            column=column,
        ) from None


def read_bytes(path: Path) -> bytes:
    """A file's bytes, or :class:`InputError` naming it when it cannot be read (no permission,
    an I/O error)."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InputError(path, f"cannot be read ({e.strerror or type(e).__name__})") from None


def read_csv_strings(path: Path, required: Iterable[str], *, allow_no_rows: bool = False) -> pd.DataFrame:
    """Read a CSV as strings, checking existence, encoding, shape and required columns.

    Empty cells are empty strings (never NaN). CRLF line ends and a UTF-8 BOM are accepted.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "is not a file")
    data = read_bytes(path)
    if not data.strip():
        raise InputError(path, "file is empty; expected a header line and data rows")
    text = _decode(path, data)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError(path, "contains a NUL byte; expected a text CSV file", row=max(line - 1, 1))
    try:
        header = next(csv.reader(io.StringIO(text)))
    except (csv.Error, StopIteration) as e:
        raise InputError(path, f"unreadable header line ({e})") from None
    header = [h.strip() for h in header]
    required = list(required)
    missing = [c for c in required if c not in header]
    if missing:
        hints = []
        for c in missing:
            close = difflib.get_close_matches(c, [h for h in header if h not in required], n=1)
            hints.append(f"'{c}'" + (f" (found '{close[0]}' — misspelt?)" if close else ""))
        raise InputError(
            path,
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(hints)}; "
            f"expected columns: {', '.join(required)}",
            row=None,
            column=missing[0],
        )
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError(path, f"column '{dupes[0]}' appears more than once in the header", column=dupes[0])
    try:
        # the parser reads the validated UTF-8 bytes directly (faster than re-encoding the text)
        df = pd.read_csv(
            io.BytesIO(data[3:] if data.startswith(codecs.BOM_UTF8) else data),
            encoding="utf-8",
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            skipinitialspace=False,
            engine="c",
        )
    except pd.errors.ParserError as e:
        m = re.search(r"line (\d+)", str(e))
        row = int(m.group(1)) - 1 if m else None
        raise InputError(path, f"malformed CSV ({str(e).strip()}); expected one field per header column", row=row) from None
    except (ValueError, csv.Error) as e:
        raise InputError(path, f"malformed CSV ({e})") from None
    df.columns = [str(c).strip() for c in df.columns]
    short = df[required].isna().any(axis=1)
    if short.any():
        i = int(np.flatnonzero(short.to_numpy())[0])
        col = next(c for c in required if pd.isna(df[c].iloc[i]))
        raise InputError(path, "row has fewer fields than the header", row=i + 1, column=col)
    if len(df) == 0 and not allow_no_rows:
        raise InputError(path, "has a header but no data rows; expected at least one row")
    return df


def one_row_per_item(path: Path, df: pd.DataFrame, subset: Subset, remedy: str) -> None:
    """Bad input naming the first row whose item (the subset's item key) appeared before."""
    dup = df.duplicated(list(subset.item_key))
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError(path, f"item {tuple(df.loc[i, list(subset.item_key)])} appears twice; expected one row per "
                               f"item ({remedy})", row=i + 1, column=subset.item_key[0])


def first_bad(path: Path, df: pd.DataFrame, column: str, bad: pd.Series, expected: str) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        value = df[column].iloc[i]
        n = int(bad.sum())
        more = f" ({n - 1} more row{'s' if n > 2 else ''} like it)" if n > 1 else ""
        raise InputError(path, f"unexpected value {value!r}; expected {expected}{more}", row=i + 1, column=column)


def bad_values(series: pd.Series, is_ok) -> pd.Series:
    """Rows whose value fails ``is_ok``, evaluating it once per distinct value.

    Export columns repeat a few values many times (usernames, dimensions, timestamps), and a
    plain comprehension over the distinct values beats pandas' per-element string methods by
    an order of magnitude; the mask is mapped back with a C-level ``isin``.
    """
    # via a plain object array: iterating pandas' string array boxes every element
    bad = [v for v in pd.unique(series.to_numpy(dtype=object)) if not is_ok(v)]
    return series.isin(bad) if bad else pd.Series(False, index=series.index)


def _is_integer_text(v: str) -> bool:
    try:
        return float(v).is_integer()  # "1000", "-5", "1000.0"; not "", "2s", "nan", "inf"
    except ValueError:
        return False


def check_nonblank(path: Path, df: pd.DataFrame, columns: Iterable[str]) -> None:
    for c in columns:
        first_bad(path, df, c, bad_values(df[c], str.strip), "a non-empty value")


def check_values(path: Path, df: pd.DataFrame, column: str, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    first_bad(path, df, column, ~df[column].isin(allowed), "one of " + ", ".join(allowed))


def check_pattern(path: Path, df: pd.DataFrame, column: str, pattern: str, expected: str) -> None:
    first_bad(path, df, column, bad_values(df[column], re.compile(pattern).fullmatch), expected)


def check_integers(path: Path, df: pd.DataFrame, column: str, expected: str) -> None:
    first_bad(path, df, column, bad_values(df[column], _is_integer_text), expected)


def load_annotations(path: Path, subset: Subset) -> pd.DataFrame:
    """annotations.csv of one subset, validated (README: “Data layout” and “Failure behaviour”)."""
    path = Path(path)
    df = read_csv_strings(path, subset.annotation_columns)
    check_nonblank(path, df, ("annotation_id", "username") + subset.item_key)
    check_values(path, df, "rating", subset.scale)
    for col, allowed in subset.categories.items():
        check_values(path, df, col, allowed)
    check_pattern(path, df, "created_at", CREATED_AT_RE, "a timestamp YYYY-MM-DD HH:MM:SS")
    for col in ("reaction_time_ms", "sample_time_ms"):
        check_integers(path, df, col, "an integer number of milliseconds")
    # the timestamp must also be a real date (2026-02-30 matches the pattern)
    ts = pd.to_datetime(df["created_at"], format="%Y-%m-%d %H:%M:%S", errors="coerce")
    first_bad(path, df, "created_at", ts.isna(), "a valid date and time YYYY-MM-DD HH:MM:SS")
    check_unique_ids(path, df, "annotation_id")
    return df


def check_unique_ids(path: Path, df: pd.DataFrame, id_column: str) -> None:
    """The same id twice is fine when the rows are identical; with different content it is a
    conflict we cannot resolve, so the run stops."""
    dup = df[id_column].duplicated(keep=False)
    if not dup.any():
        return
    sub = df[dup]
    distinct = sub.drop_duplicates()
    conflicting = distinct[id_column].duplicated(keep=False)
    if conflicting.any():
        bad_id = distinct.loc[conflicting, id_column].iloc[0]
        rows = np.flatnonzero((df[id_column] == bad_id).to_numpy())
        a, b = df.iloc[rows[0]], df.iloc[rows[1]]
        col = next((c for c in df.columns if a[c] != b[c]), id_column)
        raise InputError(
            path,
            f"duplicate {id_column} {bad_id!r} with different content (rows {rows[0] + 1} and "
            f"{rows[1] + 1} differ in '{col}': {a[col]!r} vs {b[col]!r}); expected each "
            f"{id_column} once",
            row=int(rows[1]) + 1,
            column=col,
        )


def load_users(path: Path) -> pd.DataFrame:
    path = Path(path)
    df = read_csv_strings(path, USERS_COLUMNS)
    check_nonblank(path, df, ("username",))
    dup = df["username"].duplicated()
    first_bad(path, df, "username", dup, "each username once")
    return df


def load_flags(path: Path, subset: Subset) -> pd.DataFrame | None:
    """flags.csv if present (None when the file does not exist); a header-only file is no flags."""
    path = Path(path)
    if not path.exists():
        return None
    df = read_csv_strings(path, FLAGS_COLUMNS, allow_no_rows=True)
    check_nonblank(path, df, ("username",) + subset.item_key)
    for col, allowed in subset.categories.items():
        if col in df.columns:
            check_values(path, df, col, allowed)
    return df


def load_rubric(path: Path) -> dict | None:
    """variables.json; None (with the prompt fallbacks) when absent."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(read_bytes(path).decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(path, "is not valid UTF-8; expected a UTF-8 JSON rubric") from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"is not valid JSON ({e.msg}); expected an object keyed by dimension", row=e.lineno) from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object keyed by dimension code")
    return data


def load_json_object(path: Path, what: str) -> dict:
    """A JSON file that must hold an object (``what`` says which file it should be), or
    :class:`InputError` naming it: unreadable, not JSON (with the line and column), or not an
    object."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(path, f"unreadable ({e.strerror or type(e).__name__}); expected {what}") from None
    except UnicodeDecodeError:
        raise InputError(path, f"is not UTF-8 text; expected {what}") from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); expected {what}") from None
    if not isinstance(data, dict):
        raise InputError(path, f"holds a JSON {type(data).__name__}, not an object; expected {what}")
    return data


# ---------------------------------------------------------------------------------------------
# what analysis.py wrote, read by benchmark.py


BOOL_VALUES = ("True", "False")


def load_labels(path: Path, subset: Subset) -> pd.DataFrame:
    """benchmark_labels.csv of ``subset``, validated; refuses a file from another subset."""
    path = Path(path)
    required = [*subset.item_key, "majority_present", "majority_present_tie", "benchmark_bucket", "n_raters",
                "all_agree_binary"]
    if subset.has_flags:
        required.append("flagged")
    try:
        df = read_csv_strings(path, required, allow_no_rows=True)
    except InputError as e:
        header = read_bytes(path).decode("utf-8", "replace").split("\n", 1)[0].split(",") if path.is_file() else []
        other = [s.name for s in SUBSETS.values() if s is not subset and set(s.item_key) <= set(h.strip() for h in header)]
        if other:
            raise InputError(path, f"is a labels file of {other[0]}, not {subset.name}; expected the "
                                   f"benchmark_labels.csv that analysis.py wrote for {subset.name}", column=e.column) from None
        raise
    check_values(path, df, "majority_present", ("0", "1"))
    for col in ("all_agree_binary", "majority_present_tie", *(("flagged",) if subset.has_flags else ())):
        check_values(path, df, col, BOOL_VALUES)
    check_pattern(path, df, "n_raters", r"[1-9]\d*", "a positive integer")
    for col, allowed in subset.categories.items():
        check_values(path, df, col, allowed)
    one_row_per_item(path, df, subset, "re-run analysis.py")  # a second row would be scored twice
    out = df.copy()
    out["majority_present"] = out["majority_present"].astype(np.int64)
    out["n_raters"] = out["n_raters"].astype(np.int64)
    out["all_agree_binary"] = out["all_agree_binary"] == "True"
    out["majority_present_tie"] = out["majority_present_tie"] == "True"
    out["flagged"] = (out["flagged"] == "True") if subset.has_flags else False
    return out


def load_votes(path: Path, subset: Subset) -> pd.DataFrame:
    """votes.csv of ``subset`` (written by analysis.py), validated: the item key, ``rater``,
    ``rating`` on the subset's scale and ``binary`` 0/1 consistent with it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "not found; it is written by analysis.py since the model-vs-human comparison was "
                               "added: re-run analysis.py")
    df = read_csv_strings(path, [*subset.item_key, "rater", "rating", "binary"], allow_no_rows=True)
    check_values(path, df, "rating", subset.scale)
    check_values(path, df, "binary", ("0", "1"))
    expected = df["rating"].map({label: str(int(i >= subset.present_from)) for i, label in enumerate(subset.scale)})
    bad = expected != df["binary"]
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(path, f"binary {df['binary'].iloc[i]!r} does not match rating {df['rating'].iloc[i]!r}",
                         row=i + 1, column="binary")
    out = df.copy()
    out["binary"] = out["binary"].astype(np.int64)
    out["value"] = out["rating"].map({label: i for i, label in enumerate(subset.scale)}).astype(np.int64)
    return out


def load_rater_model_labels(path: Path, subset: Subset) -> pd.DataFrame | None:
    """rater_models.csv of ``subset`` (analysis.py), validated: the item key, each model's
    ``<model>_label`` (0/1) and ``<model>_present_probability`` (a number in [0, 1]); None when
    absent (an analysis run from before the rater models)."""
    from .rater_models import MODELS

    path = Path(path)
    if not path.is_file():
        return None
    labels = [f"{m}_label" for m in MODELS]
    probabilities = [f"{m}_present_probability" for m in MODELS]
    df = read_csv_strings(path, [*subset.item_key, *labels, *probabilities], allow_no_rows=True)
    for col in labels:
        check_values(path, df, col, ("0", "1"))
    one_row_per_item(path, df, subset, "re-run analysis.py")
    out = df[[*subset.item_key, *labels]].copy()
    out[labels] = out[labels].astype(np.int64)
    for col in probabilities:
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)
        bad = ~((values >= 0) & (values <= 1))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(path, f"{df[col].iloc[row]!r} is not a probability in [0, 1]", row=row + 1, column=col)
        out[col] = values
    return out


def load_rater_channels(path: Path) -> tuple[float, float, int] | None:
    """The raters' mean Dawid–Skene sensitivity and specificity (``rater_models.noise_ceiling``
    of analysis.py's summary.json) and the rounds the fit took (``rater_models.dawid_skene.
    iterations``), for the noise ceiling; None when the file or the figures are absent; a value
    that is not a number in [0, 1], or rounds that are not a positive integer, are bad input."""
    path = Path(path)
    if not path.exists():
        return None
    block = (load_json_object(path, "the summary.json analysis.py wrote").get("rater_models") or {})
    ceiling = block.get("noise_ceiling") if isinstance(block, dict) else None
    if not isinstance(ceiling, dict) or "mean_sensitivity" not in ceiling:
        return None
    out = []
    for key in ("mean_sensitivity", "mean_specificity"):
        value = ceiling.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InputError(path, f"rater_models.noise_ceiling.{key} holds {value!r}; expected a number in [0, 1]",
                             column=f"rater_models.noise_ceiling.{key}")
        out.append(float(value))
    rounds = (block.get("dawid_skene") or {}).get("iterations")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InputError(path, f"rater_models.dawid_skene.iterations holds {rounds!r}; expected a positive integer",
                         column="rater_models.dawid_skene.iterations")
    return out[0], out[1], rounds


def load_analysis_summary(path: Path) -> tuple[dict, int, dict]:
    """From analysis.py's summary.json: the human reference figures (:data:`summary.HUMAN_ALIASES`),
    the ``--min-items`` that run used (``agreement_detail.min_items``) and whether each figure is
    reliable there (``agreement_detail.figures[…].reliable``; a figure it does not rate is
    reliable). A missing file gives nulls and the default minimum, with a warning; a malformed one
    is bad input (not JSON, not an object, a figure or minimum that is not a number)."""
    from .defaults import MIN_ITEMS
    from .summary import HUMAN_ALIASES

    path = Path(path)
    if not path.exists():
        print(f"warning: {path} not found; human reference numbers will be null", file=sys.stderr)
        return {alias: None for alias, _ in HUMAN_ALIASES}, MIN_ITEMS, {alias: False for alias, _ in HUMAN_ALIASES}
    summary = load_json_object(path, "the summary.json analysis.py wrote")
    human = {}
    for alias, _ in HUMAN_ALIASES:
        value = summary.get(alias)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InputError(path, f"key '{alias}' holds {value!r}; expected a number or null", column=alias)
        human[alias] = value
    detail = summary.get("agreement_detail")
    min_items = detail.get("min_items", MIN_ITEMS) if isinstance(detail, dict) else MIN_ITEMS
    if isinstance(min_items, bool) or not isinstance(min_items, int) or min_items < 1:
        raise InputError(path, f"agreement_detail.min_items holds {min_items!r}; expected a positive integer",
                         column="agreement_detail.min_items")
    figures = detail.get("figures", {}) if isinstance(detail, dict) else {}
    reliable = {alias: bool((figures.get(key) or {}).get("reliable", True)) for alias, key in HUMAN_ALIASES}
    return human, min_items, reliable
