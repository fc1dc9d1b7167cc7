"""Prompt templates and model presets without a model: the sham scorer scores every template
(its similarity is a hash of stem and prompt, so each template's column can be recomputed
independently here), the ensemble is the mean of the templates' similarities, bad templates are
refused, a checkpoint with its own code is refused without --trust-remote-code, and the preset
table resolves as documented."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from emolia_bench.errors import InputError
from emolia_bench.metrics import binary_metrics
from emolia_bench.presets import PRESETS, resolve_model
from emolia_bench.scorers.sham import sham_similarity
from emolia_bench.subsets import DIM, EMO
from emolia_bench.templates import template_fields, templates_by_subset

from .conftest import run_script, snapshot

EMO_TEMPLATES = ["A voice full of {emotion}.", "{emotion}"]
DIM_TEMPLATE = "Listen: {rubric}"


def test_every_template_is_scored_and_the_headline_is_their_mean(worked_analysed, tmp_path):
    out = tmp_path / "bm"
    args = [a for t in [*EMO_TEMPLATES, DIM_TEMPLATE] for a in ("--prompt-template", t)]
    r = run_script("benchmark.py", "--output-dir", out, *args, cwd=worked_analysed)
    assert r.returncode == 0, r.stderr
    emo = pd.read_csv(out / "emolia-emo" / "predictions.csv")
    ok = emo[emo["ok"]]
    assert len(ok) >= 4 and set(ok["majority_present"]) == {0, 1}
    # each template's column, recomputed from the stem and the template filled in by hand
    words = {"Jealousy___Envy": "Jealousy / Envy"}  # the spelling rule (README), by hand for the one compound name
    for k, template in enumerate(EMO_TEMPLATES, start=1):
        for row in ok.itertuples():
            emotion = words.get(row.queried_emotion, row.queried_emotion.replace("_", " "))
            stem = row.audio_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            want = sham_similarity(stem, template.replace("{emotion}", emotion))
            assert getattr(row, f"similarity_template_{k}") == pytest.approx(want, abs=1e-15)
    # the headline similarity is the mean of the two, and the prompt column is template 1's text
    np.testing.assert_allclose(ok["similarity"], (ok["similarity_template_1"] + ok["similarity_template_2"]) / 2,
                               rtol=0, atol=1e-15)
    assert ok["prompt"].str.startswith("A voice full of ").all()
    summary = json.loads((out / "emolia-emo" / "summary.json").read_text())
    block = summary["prompt_templates"]
    assert block["templates"] == EMO_TEMPLATES and block["n"] == len(ok)
    # balanced accuracy of each template at threshold 0, recomputed with the shared metric
    truth = ok["majority_present"].to_numpy()
    for k, entry in enumerate(block["per_template"], start=1):
        want = binary_metrics(truth, (ok[f"similarity_template_{k}"] >= 0).astype(int).to_numpy())["balanced_accuracy"]
        assert entry["balanced_accuracy"] == pytest.approx(want) if want is not None else entry["balanced_accuracy"] is None
    bas = [e["balanced_accuracy"] for e in block["per_template"] if e["balanced_accuracy"] is not None]
    assert len(bas) == 2
    assert block["spread"]["balanced_accuracy"] == pytest.approx({"best": max(bas), "mean": sum(bas) / len(bas),
                                                                  "worst": min(bas)})
    assert summary["overall"]["balanced_accuracy"] == block["ensemble"]["balanced_accuracy"]
    table = pd.read_csv(out / "emolia-emo" / "metrics_by_template.csv")
    assert table["template"].tolist() == ["template 1", "template 2", "ensemble"]
    report = (out / "emolia-emo" / "report.md").read_text()
    assert "## Prompt templates" in report and "`A voice full of {emotion}.`" in report
    # one dim template: no ensemble, no extra columns; the prompt is the template filled in
    dim = pd.read_csv(out / "emolia-dim" / "predictions.csv")
    assert not any(c.startswith("similarity_template_") for c in dim.columns)
    assert dim["prompt"].str.startswith("Listen: ").all()
    assert "prompt_templates" not in json.loads((out / "emolia-dim" / "summary.json").read_text())


def test_the_default_template_is_upstreams_prompt():
    items = pd.DataFrame({"queried_emotion": ["Jealousy___Envy", "Awe"]})
    assert EMO.prompt(items, None).tolist() == [
        "Speech audio in which the speaker expresses or conveys Jealousy / Envy.",
        "Speech audio in which the speaker expresses or conveys Awe."]
    assert EMO.prompt(items, None, "{emotion}!").tolist() == ["Jealousy / Envy!", "Awe!"]
    assert EMO.prompt(items, None, "{{literal}} {emotion}").tolist()[1] == "{literal} Awe"
    dims = pd.DataFrame({"dimension": ["TEMP"], "level": ["5"]})
    assert DIM.prompt(dims, None, "<{rubric}>").iloc[0] == "<Speech audio matching the description of TEMP at level 5.>"


@pytest.mark.parametrize("template, why", [
    ("{emotion", "not a valid template"),
    ("no field at all", "names none"),
    ("{speaker} says {emotion}", "exactly one field"),
    ("{emotion.upper}", "exactly one field"),
])
def test_bad_templates_are_refused(template, why):
    with pytest.raises(InputError, match=why):
        templates_by_subset([template], [EMO, DIM])


def test_templates_go_to_the_subset_whose_field_they_name():
    assert templates_by_subset(["a {emotion}", "{rubric}.", "a {emotion}"], [EMO, DIM]) == {
        "emolia-emo": ["a {emotion}"], "emolia-dim": ["{rubric}."]}
    assert templates_by_subset(None, [EMO]) == {"emolia-emo": None}
    with pytest.raises(InputError, match="rubric"):  # only emo is run: a dim template names nothing run
        templates_by_subset(["{rubric}"], [EMO])
    assert template_fields("x {emotion} {{y}}") == {"emotion"}


def test_a_bad_template_is_exit_2_with_nothing_written(worked_analysed, tmp_path):
    r = run_script("benchmark.py", "--output-dir", tmp_path / "bm", "--prompt-template", "{emotion", cwd=worked_analysed)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--prompt-template" in r.stderr
    assert not (tmp_path / "bm").exists()


def test_the_preset_table():
    assert set(PRESETS) == {"voiceclap-small", "voiceclap-small-v2", "voiceclap-large", "voiceclap-large-v2"}
    small = resolve_model("voiceclap-small", None)
    assert (small.model, small.backend, small.max_seconds, small.trust_remote_code) == (
        "laion/voiceclap-small", "remote-code", 30.0, True)
    assert "trust_remote_code" in small.note  # the implication is printed
    large = resolve_model("voiceclap-large-v2", None)
    assert (large.model, large.backend, large.max_seconds) == ("laion/voiceclap-large-v2", "sentence-transformers", 30.0)
    local = resolve_model("voiceclap-small-v2", "/models/vc", max_seconds=12.0, trust_remote_code=True)
    assert (local.model, local.backend, local.max_seconds, local.note) == ("/models/vc", "remote-code", 12.0, None)
    plain = resolve_model(None, "/models/clap")
    assert (plain.model, plain.backend, plain.max_seconds, plain.trust_remote_code) == ("/models/clap", "auto", 10.0, False)
    with pytest.raises(ValueError):
        resolve_model("voiceclap-huge", None)
    r = run_script("benchmark.py", "--help")
    assert all(name in r.stdout for name in PRESETS) and "--trust-remote-code" in r.stdout


def test_a_checkpoint_with_its_own_code_is_refused_without_trust(worked_analysed, tmp_path):
    """Refused before anything is loaded (no PyTorch needed): exit 2, the reason named, nothing written."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"auto_map": {"AutoModel": "modeling.Model"}}))
    before = snapshot(worked_analysed)
    r = run_script("benchmark.py", "--output-dir", tmp_path / "bm", "--clap-model", ckpt, cwd=worked_analysed)
    assert r.returncode == 2, r.stderr
    assert "--trust-remote-code" in r.stderr and "own modelling code" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "bm").exists() and snapshot(worked_analysed) == before
    r = run_script("benchmark.py", "--similarity", "logit", cwd=worked_analysed)  # not for the sham scorer
    assert r.returncode == 2 and "in-process" in r.stderr
