"""The bad-input corpus: every case runs a real script on a broken copy of good inputs and
asserts exit code 2, no traceback, one message naming the file, the row (where there is one)
and the column, and that the outputs of the earlier good run are byte-identical afterwards.
Accepted-as-is inputs (BOM, CRLF, a missing rubric, flags for unknown items) are checked too."""

from __future__ import annotations

import json
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .conftest import WORKED, run_script, snapshot


@dataclass
class Case:
    id: str
    script: str
    file: str  # relative to the project folder; "" for cases without a file
    breaker: object  # callable(project: Path) -> None
    expect: tuple[str, ...] = ()  # substrings of stderr besides the file name
    args: tuple[str, ...] = ()
    output: str = "analysis_outputs"
    extra: dict = field(default_factory=dict)


def edit(rel: str, fn):
    def breaker(project: Path):
        p = project / rel
        p.write_bytes(fn(p.read_bytes()))
    return breaker


def replace(rel: str, old: str, new: str, count: int = 1):
    return edit(rel, lambda b: b.replace(old.encode(), new.encode(), count))


def remove(rel: str):
    return lambda project: (project / rel).unlink()


EMO = "annotations/emolia-emo/annotations.csv"
DIM = "annotations/emolia-dim/annotations.csv"
USERS = "annotations/emolia-emo/users.csv"
FLAGS = "annotations/emolia-dim/flags.csv"
RAW = "annotations_raw/emolia-dim/annotations.csv"
RAW_FLAGS = "annotations_raw/emolia-dim/flags.csv"
LABELS = "analysis_outputs/emolia-dim/benchmark_labels.csv"
RUBRIC = "dataset/emolia-dim/variables.json"


def set_field(rel: str, row: int, column: str, value: bytes):
    """Set one cell (data row ``row``, 1-based) of a simple CSV without quoted commas."""
    def f(b: bytes) -> bytes:
        lines = b.split(b"\n")
        col = lines[0].decode().split(",").index(column)
        cells = lines[row].split(b",")
        cells[col] = value
        lines[row] = b",".join(cells)
        return b"\n".join(lines)
    return edit(rel, f)


def duplicate_with_other_rating(path: Path) -> None:
    """Append a copy of data row 1 with the same annotation_id but a different rating."""
    lines = path.read_text().splitlines()
    col = lines[0].split(",").index("rating")
    cells = lines[1].split(",")
    cells[col] = "weakly_present" if cells[col] != "weakly_present" else "not_present"
    path.write_text("\n".join([*lines, ",".join(cells)]) + "\n")


def second_row(rel: str, fn):
    """Apply fn to the second data line only."""
    def f(b: bytes) -> bytes:
        lines = b.split(b"\n")
        lines[2] = fn(lines[2])
        return b"\n".join(lines)
    return edit(rel, f)


CASES = [
    # analysis.py
    Case("missing-file", "analysis.py", USERS, remove(USERS), ("not found",)),
    Case("missing-column", "analysis.py", EMO, replace(EMO, ",created_at", ""), ("created_at",)),
    Case("misspelt-column", "analysis.py", EMO, replace(EMO, "queried_emotion", "queried_emotoin"),
         ("'queried_emotion'", "queried_emotoin")),
    Case("unknown-rating", "analysis.py", EMO, set_field(EMO, 2, "rating", b"presnt"),
         ("row 2", "'rating'", "presnt")),
    Case("unknown-task-type", "analysis.py", EMO, set_field(EMO, 2, "task_type", b"contrastive_9"),
         ("row 2", "'task_type'")),
    Case("unknown-polarity", "analysis.py", DIM, set_field(DIM, 2, "polarity", b"postive"),
         ("row 2", "'polarity'")),
    Case("empty-file", "analysis.py", EMO, edit(EMO, lambda b: b""), ("empty",)),
    Case("header-only", "analysis.py", EMO, edit(EMO, lambda b: b.split(b"\n")[0] + b"\n"), ("no data rows",)),
    Case("non-utf8", "analysis.py", EMO, set_field(EMO, 2, "username", b"us\xe9r_1"),
         ("row 2", "'username'", "UTF-8")),
    Case("utf16-file", "analysis.py", USERS, edit(USERS, lambda b: b.decode().encode("utf-16")), ("UTF-8",)),
    Case("conflicting-duplicate-id", "analysis.py", EMO, lambda p: duplicate_with_other_rating(p / EMO),
         ("duplicate annotation_id", "'rating'")),
    Case("unparseable-created-at", "analysis.py", DIM, set_field(DIM, 2, "created_at", b"2026-04-01T10:02:00"),
         ("row 2", "'created_at'", "YYYY-MM-DD HH:MM:SS")),
    Case("impossible-date", "analysis.py", DIM, set_field(DIM, 2, "created_at", b"2026-02-30 10:02:00"),
         ("row 2", "'created_at'")),
    Case("non-integer-time", "analysis.py", DIM, set_field(DIM, 2, "reaction_time_ms", b"2s"),
         ("row 2", "'reaction_time_ms'")),
    Case("short-row", "analysis.py", EMO, second_row(EMO, lambda line: line.rsplit(b",", 3)[0]), ("row 2",)),
    Case("bad-flags-polarity", "analysis.py", FLAGS, replace(FLAGS, "negative", "sideways"), ("row 1", "'polarity'")),
    Case("users-duplicate", "analysis.py", USERS, edit(USERS, lambda b: b + b.split(b"\n")[1] + b"\n"),
         ("row 5", "'username'")),
    # anonymize.py
    Case("anonymize-missing-file", "anonymize.py", "annotations_raw/emolia-emo/users.csv",
         remove("annotations_raw/emolia-emo/users.csv"), ("not found",), output="annotations"),
    Case("anonymize-unknown-rating", "anonymize.py", RAW, set_field(RAW, 2, "rating", b"maybe"),
         ("row 2", "'rating'"), output="annotations"),
    Case("anonymize-name-in-free-text", "anonymize.py", RAW_FLAGS, replace(RAW_FLAGS, "No speech", "ask Alice Smith"),
         ("row 1", "'reason'"), output="annotations"),
    Case("anonymize-bad-map", "anonymize.py", "annotations_raw/emolia-dim/_anon_map.csv",
         edit("annotations_raw/emolia-dim/_anon_map.csv", lambda b: b + b"Someone Else,user_0\n"),
         ("'anon_username'",), output="annotations"),
    # benchmark.py
    Case("benchmark-labels-of-other-subset", "benchmark.py", LABELS,
         lambda p: shutil.copy(p / "analysis_outputs/emolia-emo/benchmark_labels.csv", p / LABELS),
         ("emolia-emo",), output="benchmark_outputs"),
    Case("benchmark-missing-labels", "benchmark.py", LABELS, remove(LABELS), ("not found",), output="benchmark_outputs"),
    Case("benchmark-bad-majority", "benchmark.py", LABELS,
         set_field(LABELS, 2, "majority_present", b"2"),
         ("row 2", "'majority_present'"), output="benchmark_outputs"),
    Case("benchmark-rubric-not-json", "benchmark.py", RUBRIC, edit(RUBRIC, lambda b: b[:-20]), ("JSON",),
         output="benchmark_outputs"),
    Case("benchmark-bad-endpoint-url", "benchmark.py", "", lambda p: None, ("--endpoint",),
         args=("--endpoint", "ftp://example"), output="benchmark_outputs"),
    Case("benchmark-duplicated-item", "benchmark.py", LABELS,
         edit(LABELS, lambda b: b + b.split(b"\n")[1] + b"\n"), ("appears twice", "'file_name'"),
         output="benchmark_outputs"),
    *[Case(f"benchmark-template-{name}", "benchmark.py", "", lambda p: None, ("--prompt-template", "format spec"),
           args=("--prompt-template", template), output="benchmark_outputs")
      for name, template in (("spec", "{emotion:d}"), ("conversion", "{emotion!x}"), ("nested", "{emotion:{emotion}}"))],
    *[Case(f"benchmark-clap-max-seconds-{v}", "benchmark.py", "", lambda p: None, ("--clap-max-seconds",),
           args=("--clap-max-seconds", v), output="benchmark_outputs") for v in ("0", "-3", "inf")],
]


def make_project(tmp: Path) -> Path:
    """The worked example as a project, with raw exports (fake names) and all outputs made."""
    project = tmp / "project"
    shutil.copytree(WORKED / "input", project)
    raw = project / "annotations_raw"
    shutil.copytree(project / "annotations", raw)
    for sub in ("emolia-emo", "emolia-dim"):  # give the raw files real-looking names
        for f in (raw / sub).glob("*.csv"):
            f.write_text(f.read_text().replace("user_0", "Alice Smith").replace("user_1", "Bob Jones")
                         .replace("user_2", "Chen Wei").replace("user_3", "Dana Ortiz").replace("user_4", "Eve Park"))
    for script, args in (("anonymize.py", ()), ("analysis.py", ()), ("benchmark.py", ())):
        r = run_script(script, *args, cwd=project)
        assert r.returncode == 0, r.stderr
    return project


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused_cleanly(case: Case, pristine: Path, tmp_path: Path):
    project = tmp_path / "project"
    shutil.copytree(pristine, project, symlinks=True)
    outputs = project / case.output
    before = snapshot(outputs)
    case.breaker(project)
    r = run_script(case.script, *case.args, cwd=project)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") <= 2, r.stderr
    if case.file:
        assert case.file in r.stderr, r.stderr
    for s in case.expect:
        assert s in r.stderr, (s, r.stderr)
    assert snapshot(outputs) == before, "a failed run changed earlier outputs"


def test_corpus_is_broad():
    assert len(CASES) >= 20 and {c.script for c in CASES} >= {"analysis.py", "anonymize.py", "benchmark.py"}


# ---- accepted as-is ----------------------------------------------------------------------------


def test_bom_and_crlf_are_accepted_with_identical_results(pristine, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(pristine, project, symlinks=True)
    for rel in (EMO, DIM, USERS, FLAGS):
        p = project / rel
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes().replace(b"\n", b"\r\n"))
    r = run_script("analysis.py", "--output-root", "bom_outputs", cwd=project)
    assert r.returncode == 0, r.stderr
    for sub in ("emolia-emo", "emolia-dim"):
        assert (project / "bom_outputs" / sub / "benchmark_labels.csv").read_bytes() == \
               (project / "analysis_outputs" / sub / "benchmark_labels.csv").read_bytes()


def test_missing_rubric_falls_back_and_unknown_flags_are_listed(pristine, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(pristine, project, symlinks=True)
    (project / RUBRIC).unlink()
    r = run_script("benchmark.py", "--subset", "emolia-dim", cwd=project)
    assert r.returncode == 0, r.stderr
    s = json.loads((project / "analysis_outputs/emolia-dim/summary.json").read_text())
    assert [f["file_name"] for f in s["flags_unmatched"]] == ["sample_09.mp3"]


# ---- the sham server's command line -------------------------------------------------------------


def test_server_refuses_bad_root_and_busy_port(tmp_path):
    r = run_script("sham_clap_server.py", "--dataset-root", tmp_path / "nope")
    assert r.returncode == 2 and "not a folder" in r.stderr and "Traceback" not in r.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_script("sham_clap_server.py", "--port", port, timeout=20)
    assert r.returncode == 2 and f"127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_bad_option_values_are_refused():
    r = run_script("benchmark.py", "--workers", "0")
    assert r.returncode == 2 and "--workers" in r.stderr
    r = run_script("analysis.py", "--bootstrap-draws", "10")
    assert r.returncode == 2 and "--bootstrap-draws" in r.stderr


def test_an_unreadable_input_file_is_one_line_naming_it(tmp_path, monkeypatch):
    # chmod cannot take reading away from root (CI runs as root), so the read itself is made to
    # fail for users.csv, as it does for a file without read permission
    shutil.copytree(WORKED / "input", tmp_path, dirs_exist_ok=True)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "users.csv":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    r = run_script("analysis.py", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "users.csv" in r.stderr and "cannot be read (Permission denied)" in r.stderr
    assert not (tmp_path / "analysis_outputs").exists()
