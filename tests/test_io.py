"""Loaders refuse bad input with one message naming file, row and column (README: “Failure behaviour”)."""

import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from emolia_bench.io import InputError, load_annotations, load_flags, load_users
from emolia_bench.outputs import csv_bytes, json_bytes, write_outputs
from emolia_bench.subsets import DIM, EMO

from .conftest import DIM_HEADER, EMO_HEADER, USERS_HEADER, user_row

ROW1 = "id-1,ann,Awe,Awe,affirmative,A.mp3,strongly_present,1000,5000,2026-04-01 10:01:00\n"
ROW2 = "id-2,bob,Awe,Awe,affirmative,A.mp3,not_present,1000,5000,2026-04-01 10:02:00\n"


def write(tmp_path: Path, text: str | bytes, name: str = "annotations.csv") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def refused(path: Path, loader=lambda p: load_annotations(p, EMO)) -> InputError:
    with pytest.raises(InputError) as e:
        loader(path)
    assert str(path) in str(e.value)
    return e.value


def test_valid_file_loads_as_strings(tmp_path):
    df = load_annotations(write(tmp_path, EMO_HEADER + ROW1 + ROW2), EMO)
    assert len(df) == 2 and df["reaction_time_ms"].iloc[0] == "1000"


def test_dim_level_stays_a_string(tmp_path):
    row = "id-1,ann,TEMP,05,positive,sample_00.mp3,yes,1,2,2026-04-01 10:01:00\n"
    df = load_annotations(write(tmp_path, DIM_HEADER + row), DIM)
    assert df["level"].iloc[0] == "05"


def test_missing_file(tmp_path):
    e = refused(tmp_path / "nope.csv")
    assert "not found" in e.message


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path, content):
    assert "empty" in refused(write(tmp_path, content)).message


def test_header_only(tmp_path):
    assert "no data rows" in refused(write(tmp_path, EMO_HEADER)).message


def test_missing_and_misspelt_column(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER.replace("rating", "ratng") + ROW1))
    assert e.column == "rating" and "ratng" in e.message and "misspelt" in e.message
    e = refused(write(tmp_path, EMO_HEADER.replace(",source_emotion", "") + ROW1.replace(",Awe,Awe", ",Awe", 1)))
    assert e.column == "source_emotion"


def test_unknown_rating_names_row_and_column(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER + ROW1 + ROW2.replace("not_present", "maybe")))
    assert (e.row, e.column) == (2, "rating")
    assert "'maybe'" in e.message and "not_present" in e.message


def test_unknown_task_type_and_polarity(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER + ROW1.replace("affirmative", "affirmativ")))
    assert (e.row, e.column) == (1, "task_type")
    row = "id-1,ann,TEMP,5,positiv,sample_00.mp3,yes,1,2,2026-04-01 10:01:00\n"
    e = refused(write(tmp_path, DIM_HEADER + row), lambda p: load_annotations(p, DIM))
    assert e.column == "polarity"


def test_dim_rating_scale_is_its_own(tmp_path):
    row = "id-1,ann,TEMP,5,positive,sample_00.mp3,strongly_present,1,2,2026-04-01 10:01:00\n"
    e = refused(write(tmp_path, DIM_HEADER + row), lambda p: load_annotations(p, DIM))
    assert e.column == "rating" and "no, yes" in e.message


def test_non_utf8_names_row_and_column(tmp_path):
    data = (EMO_HEADER + ROW1).encode() + b"id-2,b\xe9b,Awe,Awe,affirmative,A.mp3,not_present,1,2,2026-04-01 10:02:00\n"
    e = refused(write(tmp_path, data))
    assert (e.row, e.column) == (2, "username") and "UTF-8" in e.message


def test_bom_and_crlf_are_accepted(tmp_path):
    text = "\ufeff" + (EMO_HEADER + ROW1 + ROW2).replace("\n", "\r\n")
    df = load_annotations(write(tmp_path, text), EMO)
    assert list(df.columns)[0] == "annotation_id" and df["created_at"].iloc[1] == "2026-04-01 10:02:00"


def test_conflicting_duplicate_id(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER + ROW1 + ROW1.replace("strongly_present", "not_present")))
    assert e.row == 2 and e.column == "rating" and "id-1" in e.message


def test_identical_duplicate_id_is_not_a_conflict(tmp_path):
    assert len(load_annotations(write(tmp_path, EMO_HEADER + ROW1 + ROW1), EMO)) == 2


@pytest.mark.parametrize("bad", ["2026-04-01T10:01:00", "yesterday", "2026-02-30 10:00:00", ""])
def test_unparseable_created_at(tmp_path, bad):
    e = refused(write(tmp_path, EMO_HEADER + ROW1.replace("2026-04-01 10:01:00", bad)))
    assert (e.row, e.column) == (1, "created_at")


def test_non_integer_times(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER + ROW1.replace(",1000,", ",fast,")))
    assert e.column == "reaction_time_ms"


def test_short_row(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER + ROW1 + "id-2,bob,Awe\n"))
    assert e.row == 2


def test_blank_key_value(tmp_path):
    e = refused(write(tmp_path, EMO_HEADER + ROW1.replace("A.mp3", "")))
    assert e.column == "file_name"


def test_users_loader(tmp_path):
    p = write(tmp_path, USERS_HEADER + user_row("user_0") + user_row("user_1"), "users.csv")
    assert load_users(p)["username"].tolist() == ["user_0", "user_1"]
    e = refused(write(tmp_path, USERS_HEADER + user_row("user_0") + user_row("user_0"), "users.csv"), load_users)
    assert (e.row, e.column) == (2, "username")
    e = refused(write(tmp_path, USERS_HEADER.replace("gender", "sex") + user_row("user_0"), "users.csv"), load_users)
    assert e.column == "gender"


def test_users_columns_matched_by_name(tmp_path):
    header = "consent,username,is_active,is_admin,onboarded,annotation_count,created_at,age,languages,gender,degree,expertise,listening_setup\n"
    p = write(tmp_path, header + 'True,user_9,1,0,True,0,x,30,"English",Male,MSc,1,Speakers\n', "users.csv")
    assert load_users(p)["username"].tolist() == ["user_9"]


def test_flags_optional_and_header_only_is_no_flags(tmp_path):
    assert load_flags(tmp_path / "flags.csv", DIM) is None
    header = "flag_id,username,dimension,level,polarity,file_name,reason,created_at\n"
    assert len(load_flags(write(tmp_path, header, "flags.csv"), DIM)) == 0
    e = refused(write(tmp_path, header + "f1,u,TEMP,5,sideways,s.mp3,r,2026-04-01 10:00:00\n", "flags.csv"),
                lambda p: load_flags(p, DIM))
    assert e.column == "polarity"


def test_strict_json_never_nan():
    out = json_bytes({"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": None}}).decode()
    assert "NaN" not in out and "Infinity" not in out
    assert '"a": null' in out


def test_write_outputs_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    write_outputs(tmp_path, {"sub/out.txt": b"one"})
    write_outputs(tmp_path, {"sub/out.txt": b"two"})
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_write_outputs_is_all_or_nothing_when_a_folder_cannot_be_written(tmp_path):
    root = tmp_path / "out"
    write_outputs(root, {"a/x.csv": b"old x", "b.json": b"old b"})
    (root / "c").write_bytes(b"a file where a folder is needed")
    with pytest.raises(InputError) as e:
        # x.csv and b.json are staged first; c/y.csv cannot be: nothing may change
        write_outputs(root, {"a/x.csv": b"new x", "b.json": b"new b", "c/y.csv": b"new y"})
    assert str(e.value).startswith(str(root / "c") + ":") and "a file where an output folder must go" in str(e.value)
    assert (root / "a/x.csv").read_bytes() == b"old x" and (root / "b.json").read_bytes() == b"old b"
    assert sorted(p.name for p in root.rglob("*")) == ["a", "b.json", "c", "x.csv"]  # no temp files left


def test_csv_bytes_quotes_as_upstream_reads_it():
    # predictions.csv: prompts with commas and quotes, a nullable 0/1 with <NA> for unscored rows,
    # an error column of None and strings; the expected lines are written by hand (RFC 4180
    # quoting, empty cells for missing values, "\n" line ends)
    df = pd.DataFrame({
        "file_name": ["a.mp3", "b.mp3"],
        "prompt": ['A voice, calm and "low".', "plain"],
        "similarity": [0.25, float("nan")],
        "pred_present": pd.array([1, None], dtype="Int64"),
        "ok": [True, False],
        "error": [None, "audio_missing: no file"],
    })
    assert csv_bytes(df).decode() == ("file_name,prompt,similarity,pred_present,ok,error\n"
                                      'a.mp3,"A voice, calm and ""low"".",0.25,1,True,\n'
                                      "b.mp3,plain,,,False,audio_missing: no file\n")


def test_a_folder_in_an_output_slot_is_refused_before_anything_is_replaced(tmp_path):
    root = tmp_path / "out"
    write_outputs(root, {"a.csv": b"old a", "b/summary.json": b"old s", "z.md": b"old z"})
    (root / "b/summary.json").unlink()
    (root / "b/summary.json").mkdir()  # a folder where summary.json must go
    with pytest.raises(InputError) as e:
        write_outputs(root, {"a.csv": b"new a", "b/summary.json": b"new s", "z.md": b"new z"})
    assert "summary.json" in str(e.value) and "is a folder where an output file must go" in str(e.value)
    assert (root / "a.csv").read_bytes() == b"old a" and (root / "z.md").read_bytes() == b"old z"


def test_a_rename_failing_midway_puts_back_the_files_already_replaced(tmp_path, monkeypatch):
    import os

    root = tmp_path / "out"
    write_outputs(root, {"a.csv": b"old a", "b.csv": b"old b", "c.csv": b"old c"})
    real, calls = os.replace, []

    def failing_third(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", failing_third)
    with pytest.raises(InputError) as e:
        write_outputs(root, {"a.csv": b"new a", "b.csv": b"new b", "c.csv": b"new c", "d.csv": b"new d"})
    monkeypatch.setattr(os, "replace", real)
    assert "restored" in str(e.value)
    assert {p.name: p.read_bytes() for p in root.iterdir()} == {"a.csv": b"old a", "b.csv": b"old b", "c.csv": b"old c"}


def test_concurrent_writers_never_mix_their_sets(tmp_path):
    # Two processes write different full sets into one folder, several times at once: every
    # run succeeds, and the folder always holds one run's set entirely (never a mix, never a
    # run killed by the other's sweep of temporary files).
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from emolia_bench.outputs import write_outputs\n"
        "tag = sys.argv[2]\n"
        "for _ in range(10):\n"
        "    write_outputs(Path(sys.argv[1]), {f'f{i}.txt': (tag * 20000).encode() for i in range(30)})\n"
    )
    root = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(root), tag], stderr=subprocess.PIPE) for tag in "AB"]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    contents = {p.read_bytes()[:1] for p in root.iterdir()}
    assert len(contents) == 1 and len(list(root.iterdir())) == 30


def test_outputs_keep_the_users_umask(tmp_path):
    # a plain open() under umask 027 makes 0640 files; the staged-and-renamed outputs must too
    old = os.umask(0o027)
    try:
        write_outputs(tmp_path / "out", {"a/x.csv": b"x", "y.json": b"{}"})
    finally:
        os.umask(old)
    for rel in ("a/x.csv", "y.json"):
        assert stat.S_IMODE((tmp_path / "out" / rel).stat().st_mode) == 0o640, rel
