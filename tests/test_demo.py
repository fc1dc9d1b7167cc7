"""The committed demo: structure, real decodable audio for every item, size, determinism."""

import io
import json

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from emolia_bench.io import load_annotations, load_flags
from emolia_bench.labels import clean_annotations, item_table
from emolia_bench.subsets import DIM, EMO

from .conftest import REPO, run_script, snapshot

DATASET = REPO / "dataset"


def demo_items(subset):
    ann = load_annotations(REPO / "annotations" / subset.name / "annotations.csv", subset)
    return ann, item_table(clean_annotations(ann, subset), subset)


def test_emo_structure():
    ann, items = demo_items(EMO)
    assert 200 <= len(items) <= 600
    assert set(items["task_type"]) == set(EMO.categories["task_type"])
    assert ann["username"].nunique() == 3
    assert (items["n_raters"] == 1).sum() >= 1
    assert len(ann) - len(clean_annotations(ann, EMO)) >= 3  # re-ratings


def test_dim_structure():
    ann, items = demo_items(DIM)
    assert 200 <= len(items) <= 600
    assert set(items["n_raters"]) == {1, 2, 3, 4}
    assert {"Americas", "European"} & set(items["level"])
    rubric = json.loads((DATASET / "emolia-dim/variables.json").read_text())
    assert set(items["dimension"]) - set(rubric), "one annotated dimension should be missing from the rubric"
    flags = load_flags(REPO / "annotations/emolia-dim/flags.csv", DIM)
    keys = list(DIM.item_key)
    labelled = pd.MultiIndex.from_frame(items[keys])
    assert not pd.MultiIndex.from_frame(flags[keys]).isin(labelled).all(), "one flag should name an unrated item"


@pytest.mark.parametrize("subset", [EMO, DIM], ids=lambda s: s.name)
def test_every_item_has_a_decodable_distinct_clip(subset):
    _, items = demo_items(subset)
    paths = subset.audio_paths(items, DATASET)
    assert paths.notna().all()
    digests = set()
    for rel in sorted(set(paths)):
        data = (DATASET / rel).read_bytes()
        audio, sr = sf.read(io.BytesIO(data))
        assert sr == 16000 and audio.ndim == 1
        assert 0.9 <= len(audio) / sr <= 2.2
        assert np.abs(audio).max() > 0.05  # not silence
        digests.add(hash(data))
    assert len(digests) == len(set(paths))  # each clip is different


def test_demo_is_small():
    total = sum(p.stat().st_size for d in ("annotations", "dataset", "examples") for p in (REPO / d).rglob("*") if p.is_file())
    assert total < 3_000_000


def test_committed_annotations_are_the_anonymized_raw_examples(tmp_path):
    raw = tmp_path / "raw"
    for sub in ("emolia-emo", "emolia-dim"):
        (raw / sub).mkdir(parents=True)
        for f in (REPO / "examples/annotations_raw" / sub).iterdir():
            (raw / sub / f.name).write_bytes(f.read_bytes())
    r = run_script("anonymize.py", "--raw-root", raw, "--out-root", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert snapshot(tmp_path / "out") == snapshot(REPO / "annotations")


def test_generator_is_deterministic(tmp_path):
    r = run_script("scripts/make_demo.py", "--root", tmp_path)
    assert r.returncode == 0, r.stderr
    for d in ("annotations", "dataset", "examples"):
        assert snapshot(tmp_path / d) == snapshot(REPO / d), d
