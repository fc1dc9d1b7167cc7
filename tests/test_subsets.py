"""The subset descriptions: the facts of the README's “Data layout” and the rules that are code."""

from pathlib import Path

import pandas as pd
import pytest

from emolia_bench.subsets import DIM, EMO, SUBSETS, emotion_label, resolve_subsets


def test_item_keys_scales_and_binarisation():
    assert EMO.item_key == ("file_name", "queried_emotion", "task_type")
    assert DIM.item_key == ("file_name", "dimension", "level", "polarity")
    assert [EMO.rating_value(r) for r in EMO.scale] == [0, 1, 2]
    assert EMO.present_from == 1  # weakly counts as present
    assert DIM.scale == ("no", "yes") and DIM.present_from == 1
    assert EMO.ordinal and not DIM.ordinal
    assert EMO.vote_columns == ("strongly_present_votes", "weakly_present_votes", "not_present_votes")
    assert DIM.vote_columns == ("yes_votes", "no_votes")


def test_sampling_prior_and_slices():
    assert EMO.prior_positive == ("affirmative",)
    assert set(EMO.categories["task_type"]) == {"affirmative", "contrastive_1", "contrastive_2", "penultimate", "ultimate"}
    assert DIM.prior_positive == ("positive",)
    assert (EMO.type_slice, EMO.category_slice) == ("task_type", "queried_emotion")
    assert (DIM.type_slice, DIM.category_slice) == ("polarity", "dimension")


def test_every_label_column_is_described_once():
    for s in SUBSETS.values():
        assert len(set(s.label_columns)) == len(s.label_columns)
        assert set(s.item_key) <= set(s.label_columns)


def test_emotion_label_rule():
    got = emotion_label(pd.Series(["Jealousy___Envy", "Sexual_Lust", "Awe", "Hope_Enthusiasm_Optimism "]))
    assert got.tolist() == ["Jealousy / Envy", "Sexual Lust", "Awe", "Hope Enthusiasm Optimism"]


def test_dim_prompt_rubric_and_fallbacks():
    rubric = {"TEMP": {"short_description": "Tempo", "levels": {"5": "Fast speech.", "0": ""}}}
    items = pd.DataFrame({"dimension": ["TEMP", "TEMP", "TEMP", "RCQL"], "level": ["5", "0", "3", "6"]})
    assert DIM.prompt(items, rubric).tolist() == [
        "Fast speech.",
        "Speech audio expressing the dimension 'Tempo' at level 0.",  # empty level text
        "Speech audio expressing the dimension 'Tempo' at level 3.",  # missing level
        "Speech audio matching the description of RCQL at level 6.",  # missing dimension
    ]
    # no rubric at all: every prompt falls back, none fails
    assert DIM.prompt(items, None).iloc[0] == "Speech audio matching the description of TEMP at level 5."


def test_sham_stems():
    emo = pd.DataFrame({"file_name": ["EN_B00031_S07330_W000026.mp3", "a.b.wav"]})
    assert EMO.sham_stem(emo).tolist() == ["EN_B00031_S07330_W000026", "a.b"]
    dim = pd.DataFrame({"file_name": ["sample_00.mp3"], "dimension": ["LANG"], "level": ["Asian_Pacific"], "polarity": ["negative"]})
    assert DIM.sham_stem(dim).tolist() == ["sample_00__LANG_Asian_Pacific_negative"]


def test_emo_audio_prefers_mp3_and_is_deterministic(tmp_path: Path):
    base = tmp_path / "emolia-emo"
    for rel in ["z/clip.wav", "b/clip.mp3", "a/clip.mp3", "a/other.flac"]:
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(b"x")
    items = pd.DataFrame({"file_name": ["clip.mp3", "other.mp3", "missing.mp3"]})
    got = EMO.audio_paths(items, tmp_path).tolist()
    assert got == ["emolia-emo/a/clip.mp3", "emolia-emo/a/other.flac", None]


def test_dim_audio_path_uses_level_as_string(tmp_path: Path):
    p = tmp_path / "emolia-dim/data/TEMP/05/positive/sample_01.mp3"
    p.parent.mkdir(parents=True)
    p.write_bytes(b"x")
    items = pd.DataFrame({"file_name": ["sample_01.mp3", "sample_01.mp3"], "dimension": ["TEMP", "TEMP"],
                          "level": ["05", "5"], "polarity": ["positive", "positive"]})
    assert DIM.audio_paths(items, tmp_path).tolist() == ["emolia-dim/data/TEMP/05/positive/sample_01.mp3", None]


def test_resolve_subsets():
    assert resolve_subsets("both") == [EMO, DIM]
    assert resolve_subsets(["emolia-dim"]) == [DIM]
    with pytest.raises(ValueError):
        resolve_subsets(["emolia-xyz"])


def test_scripts_offer_exactly_the_described_subsets():
    # the scripts offer the names of emolia_bench.defaults (no pandas import: fast --help), and
    # their --help lists exactly the subsets described in emolia_bench.subsets
    from emolia_bench.defaults import SUBSET_NAMES

    from .conftest import run_script

    assert SUBSET_NAMES == tuple(SUBSETS)
    for script in ("anonymize.py", "analysis.py", "benchmark.py"):
        out = run_script(script, "--help").stdout
        assert "{" + ",".join([*SUBSETS, "both"]) + "}" in out, script


@pytest.mark.parametrize("script", ["anonymize.py", "analysis.py", "benchmark.py"])
def test_every_stage_takes_subset_and_subsets(script):
    from .conftest import script_module

    parser = script_module(script).arguments()
    for spelling in ("--subset", "--subsets"):
        assert parser.parse_args([spelling, "emolia-dim"]).__dict__[parser._option_string_actions[spelling].dest] == ["emolia-dim"]
