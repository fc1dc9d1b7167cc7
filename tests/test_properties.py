"""Property tests: whatever bytes a loader is given, it either loads them or raises InputError
(exit 2 with a message) — never any other exception, which would surface as a traceback."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emolia_bench.io import (
    InputError,
    load_annotations,
    load_flags,
    load_labels,
    load_rubric,
    load_users,
)
from emolia_bench.subsets import DIM, EMO

from .conftest import DIM_HEADER, EMO_HEADER, USERS_HEADER, user_row

GOOD = {
    "emo": EMO_HEADER + "".join(
        f"id{i},user_{i % 3},Awe,Awe,affirmative,A{i}.mp3,weakly_present,1000,5000,2026-04-01 10:0{i}:00\n" for i in range(6)),
    "dim": DIM_HEADER + "".join(
        f"id{i},user_{i % 3},TEMP,{i},positive,sample_0{i}.mp3,yes,1000,5000,2026-04-01 10:0{i}:00\n" for i in range(6)),
    "users": USERS_HEADER + user_row("user_0") + user_row("user_1"),
    "flags": "flag_id,username,dimension,level,polarity,file_name,reason,created_at\n"
             "f1,user_0,TEMP,5,negative,sample_01.mp3,\"No speech, only music\",2026-04-01 10:40:00\n",
    "labels": "file_name,queried_emotion,task_type,majority_present,majority_present_tie,benchmark_bucket,n_raters,all_agree_binary\n"
              "A.mp3,Awe,affirmative,1,False,unanimous_present,3,True\n",
    "rubric": '{"TEMP": {"short_description": "Tempo", "levels": {"5": "Fast."}}}',
}
LOADERS = {
    "emo": lambda p: load_annotations(p, EMO),
    "dim": lambda p: load_annotations(p, DIM),
    "users": load_users,
    "flags": lambda p: load_flags(p, DIM),
    "labels": lambda p: load_labels(p, EMO),
    "rubric": load_rubric,
}
SETTINGS = settings(max_examples=int(__import__("os").environ.get("EMOLIA_HYPOTHESIS_EXAMPLES", 60)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def load_or_refuse(kind: str, path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        LOADERS[kind](path)
    except InputError as e:
        assert str(path) in str(e) and e.message


@pytest.mark.parametrize("kind", list(LOADERS))
@SETTINGS
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes(tmp_path, kind, data):
    load_or_refuse(kind, tmp_path / f"{kind}.csv", data)


MUTATIONS = ["delete", "insert", "replace", "swap_lines", "truncate", "duplicate_line"]
NOISE = [b",", b'"', b"\n", b"\r", b"\x00", b"\xff", b"\xc3", b";", b"\t", b" ", b"NaN", b"-1", b"1e309", b"\xef\xbb\xbf"]


@pytest.mark.parametrize("kind", list(LOADERS))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6))
def test_mangled_csv(tmp_path, kind, seed, n):
    rng = random.Random(seed)
    data = bytearray(GOOD[kind].encode())
    for _ in range(n):
        op = rng.choice(MUTATIONS)
        i = rng.randrange(len(data) + 1)
        if op == "delete" and data:
            del data[i:i + rng.randint(1, 5)]
        elif op == "insert":
            data[i:i] = rng.choice(NOISE)
        elif op == "replace" and i < len(data):
            data[i:i + 1] = rng.choice(NOISE)
        elif op == "truncate":
            del data[i:]
        else:
            lines = bytes(data).split(b"\n")
            if len(lines) > 2:
                j = rng.randrange(1, len(lines))
                if op == "swap_lines":
                    lines[0], lines[j] = lines[j], lines[0]
                else:
                    lines.insert(j, lines[j])
                data = bytearray(b"\n".join(lines))
    load_or_refuse(kind, tmp_path / f"{kind}.csv", bytes(data))


@pytest.mark.parametrize("kind", list(LOADERS))
def test_good_inputs_load(tmp_path, kind):
    p = tmp_path / f"{kind}.csv"
    p.write_text(GOOD[kind])
    got = LOADERS[kind](p)
    # every data line is a row (counted from the text above); the rubric's one dimension is there
    assert len(got) == (1 if kind == "rubric" else GOOD[kind].count("\n") - 1)
