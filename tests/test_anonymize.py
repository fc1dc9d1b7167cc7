"""anonymize.py: sorted first run, stable ids, flags, leak refusal, byte-identical re-runs."""

import csv

import pytest

from .conftest import DIM_HEADER, run_script, snapshot

USERS = "username,is_active,is_admin,onboarded,annotation_count,created_at,age,gender,languages,listening_setup,degree,expertise,consent\n"
FLAGS = "flag_id,username,dimension,level,polarity,file_name,reason,created_at\n"


def user(name):
    return f'{name},1,0,True,1,2026-04-28T21:30:36.460Z,30,Female,"English,Hindi",External speakers,MSc,1,True\n'


def ann(i, name, rating="yes"):
    return f"id{i},{name},TEMP,5,positive,sample_0{i}.mp3,{rating},1,2,2026-04-01 10:0{i}:00\n"


def make_raw(root, names, flag_rows=(), extra_users=()):
    d = root / "emolia-dim"
    d.mkdir(parents=True, exist_ok=True)
    (d / "annotations.csv").write_text(DIM_HEADER + "".join(ann(i, n) for i, n in enumerate(names)))
    (d / "users.csv").write_text(USERS + "".join(user(n) for n in [*names, *extra_users]))
    (d / "flags.csv").write_text(FLAGS + "".join(flag_rows))
    return d


def read_map(d):
    with open(d / "_anon_map.csv") as f:
        return {r["raw_username"]: r["anon_username"] for r in csv.DictReader(f)}


def anonymize(raw, out):
    return run_script("anonymize.py", "--raw-root", raw, "--out-root", out, "--subsets", "emolia-dim")


def test_first_run_is_sorted_and_only_usernames_change(tmp_path):
    raw = make_raw(tmp_path / "raw", ["zoe", "Adam", "mia"],
                   ["f1,Ola,TEMP,5,positive,sample_09.mp3,silence,2026-04-01 10:00:00\n"])
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "emolia-dim" in r.stdout
    # users ∪ annotations ∪ flags, sorted (upper case first, as Python sorts): Adam, Ola, mia, zoe
    assert read_map(raw) == {"Adam": "user_0", "Ola": "user_1", "mia": "user_2", "zoe": "user_3"}
    out = (tmp_path / "out/emolia-dim/annotations.csv").read_text().splitlines()
    src = (raw / "annotations.csv").read_text().splitlines()
    assert out[0] == src[0] and len(out) == len(src)
    assert [line.split(",")[1] for line in out[1:]] == ["user_3", "user_0", "user_2"]
    assert [line.split(",", 2)[2] for line in out[1:]] == [line.split(",", 2)[2] for line in src[1:]]
    assert "user_1" in (tmp_path / "out/emolia-dim/flags.csv").read_text()  # flagger who never rated
    assert not (tmp_path / "out/emolia-dim/_anon_map.csv").exists()  # the map never reaches the output


def test_new_annotator_sorting_first_keeps_everyone_elses_id(tmp_path):
    raw = make_raw(tmp_path / "raw", ["bea", "carl"])
    assert anonymize(tmp_path / "raw", tmp_path / "out").returncode == 0
    assert read_map(raw) == {"bea": "user_0", "carl": "user_1"}
    make_raw(tmp_path / "raw", ["bea", "carl", "aaron", "abe"])  # two new names that sort first
    assert anonymize(tmp_path / "raw", tmp_path / "out").returncode == 0
    assert read_map(raw) == {"bea": "user_0", "carl": "user_1", "aaron": "user_2", "abe": "user_3"}


def test_rerun_is_byte_identical(tmp_path):
    make_raw(tmp_path / "raw", ["bea", "carl"], ["f1,bea,TEMP,5,positive,sample_00.mp3,noise,2026-04-01 10:00:00\n"])
    assert anonymize(tmp_path / "raw", tmp_path / "out").returncode == 0
    first = snapshot(tmp_path)
    assert anonymize(tmp_path / "raw", tmp_path / "out").returncode == 0
    assert snapshot(tmp_path) == first


def test_raw_name_in_free_text_is_refused_and_nothing_written(tmp_path):
    make_raw(tmp_path / "raw", ["bea", "carl"])
    assert anonymize(tmp_path / "raw", tmp_path / "out").returncode == 0
    before = snapshot(tmp_path)
    make_raw(tmp_path / "raw", ["bea", "carl", "dora"],
             ["f1,bea,TEMP,5,positive,sample_00.mp3,ask Carl about this one,2026-04-01 10:00:00\n"])
    before = snapshot(tmp_path)  # raw files changed; outputs and map must not
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "flags.csv" in r.stderr and "row 1" in r.stderr and "'reason'" in r.stderr
    assert snapshot(tmp_path) == before  # no output, and the map did not gain dora


def test_name_inside_a_longer_word_is_not_a_leak(tmp_path):
    make_raw(tmp_path / "raw", ["ann", "bo"], ["f1,ann,TEMP,5,positive,sample_00.mp3,channel noise; bonus,2026-04-01 10:00:00\n"])
    assert anonymize(tmp_path / "raw", tmp_path / "out").returncode == 0


def test_bad_map_file_is_refused(tmp_path):
    raw = make_raw(tmp_path / "raw", ["bea"])
    (raw / "_anon_map.csv").write_text("raw_username,anon_username\nbea,user_0\ncarl,user_0\n")
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 2 and "_anon_map.csv" in r.stderr and "anon_username" in r.stderr


@pytest.mark.parametrize("reason", ["per Alice2 and others", "see bob_k", "ＡＬＩＣＥ said so", "alice-notes"])
def test_a_name_between_non_letters_is_a_leak_whatever_its_case_or_width(tmp_path, reason):
    # digits, underscores and hyphens are not letters: "Alice2", "bob_k" carry the names; the
    # full-width ＡＬＩＣＥ is "alice" after NFKC normalisation
    make_raw(tmp_path / "raw", ["Alice", "bob"], [f"f1,bob,TEMP,5,positive,sample_00.mp3,{reason},2026-04-01 10:00:00\n"])
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 2 and "'reason'" in r.stderr and not (tmp_path / "out").exists()


def test_a_name_in_a_file_name_is_a_leak(tmp_path):
    raw = make_raw(tmp_path / "raw", ["Alice", "bob"])
    text = (raw / "annotations.csv").read_text().replace("sample_00.mp3", "Alice_recording.mp3")
    (raw / "annotations.csv").write_text(text)
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 2 and "'file_name'" in r.stderr and "annotations.csv" in r.stderr


def test_a_username_equal_to_a_rating_does_not_block_the_run(tmp_path):
    # the dim ratings are "yes"/"no": a rater called "no" is not a leak in the rating column
    make_raw(tmp_path / "raw", ["no", "bea"])
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "out/emolia-dim/annotations.csv").read_text()
    assert ",no," not in out.split("\n", 1)[1].replace(",yes,", ",")  # no username "no" left; ratings untouched
    assert "user_1" in out  # sorted: bea -> user_0, no -> user_1


@pytest.mark.parametrize("out", ["raw", "raw/inside"])
def test_an_output_root_that_is_or_sits_in_the_raw_root_is_refused(tmp_path, out):
    make_raw(tmp_path / "raw", ["bea", "carl"])
    before = snapshot(tmp_path)
    r = anonymize(tmp_path / "raw", tmp_path / out)
    assert r.returncode == 2 and "--out-root" in r.stderr and "raw root" in r.stderr
    assert snapshot(tmp_path) == before


def test_an_annotator_of_one_subset_named_in_the_other_is_a_leak(tmp_path):
    # "Ezra" rated emolia-emo only; his name in an emolia-dim flag reason identifies him all the
    # same: every subset's names are searched in every subset (nothing written)
    raw = tmp_path / "raw"
    make_raw(raw, ["bea", "carl"], ["f1,bea,TEMP,5,positive,sample_00.mp3,ask Ezra about this,2026-04-01 10:00:00\n"])
    emo = raw / "emolia-emo"
    emo.mkdir()
    (emo / "annotations.csv").write_text(
        "annotation_id,username,source_emotion,queried_emotion,task_type,file_name,rating,reaction_time_ms,"
        "sample_time_ms,created_at\ne1,Ezra,Awe,Awe,affirmative,A.mp3,weakly_present,1000,5000,2026-04-01 10:00:00\n")
    (emo / "users.csv").write_text(USERS + user("Ezra"))
    before = snapshot(tmp_path)
    r = run_script("anonymize.py", "--raw-root", raw, "--out-root", tmp_path / "out")
    assert r.returncode == 2 and "emolia-dim/flags.csv" in r.stderr and "'ezra'" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before
    # also when only emolia-dim is anonymized: the names of every subset under the raw root count
    r = anonymize(raw, tmp_path / "out")
    assert r.returncode == 2 and "'ezra'" in r.stderr and snapshot(tmp_path) == before


@pytest.mark.parametrize("reason", ["ask \u041calice2 later", "per \u0410lice", "\u0430lice said so", "bob\u0441at"])
def test_a_name_spelt_with_look_alike_letters_is_a_leak(tmp_path, reason):
    # Cyrillic М, А, а stand in for Latin letters (Unicode TR39 confusables): "\u0410lice" is
    # "Alice" to a reader. ("bob" + Cyrillic "с" + "at" is one word, "bobcat": not a leak of bob.)
    make_raw(tmp_path / "raw", ["Alice", "bob", "Malice"], [f"f1,bob,TEMP,5,positive,sample_00.mp3,{reason},2026-04-01 10:00:00\n"])
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    if reason == "bob\u0441at":
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 2 and "'reason'" in r.stderr and not (tmp_path / "out").exists(), r.stderr


@pytest.mark.parametrize("file, column, old, new", [
    ("annotations.csv", "annotation_id", "id1,", "alice-id1,"),
    ("flags.csv", "flag_id", "f1,", "f1-alice,"),
    ("annotations.csv", "dimension", "id1,bob,TEMP,", "id1,bob,TEMP_alice,"),
    ("users.csv", "gender", ",Female,", ",Alice,"),
    ("users.csv", "age", ",30,", ",Alice,"),  # not a number: searched like free text
])
def test_every_column_is_either_of_its_closed_form_or_searched(tmp_path, file, column, old, new):
    # The report found names passing in ids, emotions / dimensions / levels and users.csv columns.
    raw = make_raw(tmp_path / "raw", ["Alice", "bob", "carl"], ["f1,bob,TEMP,5,positive,sample_00.mp3,fine,2026-04-01 10:00:00\n"])
    text = (raw / file).read_text()
    assert old in text
    (raw / file).write_text(text.replace(old, new, 1))
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 2 and f"'{column}'" in r.stderr and file in r.stderr, r.stderr


def test_a_rater_named_like_the_tasks_vocabulary_does_not_block_the_run(tmp_path):
    # "Tempo" is a dimension every rater's rows carry (the task's vocabulary); a rater called Tempo
    # is not leaked by it. The same word on one rater's rows only would be searched.
    raw = make_raw(tmp_path / "raw", ["Tempo", "bob", "carl"])
    (raw / "annotations.csv").write_text((raw / "annotations.csv").read_text().replace(",TEMP,", ",Tempo,"))
    r = anonymize(tmp_path / "raw", tmp_path / "out")
    assert r.returncode == 0, r.stderr
