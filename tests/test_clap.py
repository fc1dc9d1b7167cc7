"""The in-process CLAP backend and clap_server.py, on a tiny randomly initialised ClapModel
built inside the test (no download): shapes, determinism, batch independence, the embedding
cache, the cosine computed by hand, undecodable clips, the sentence-transformers backend, and
the demo scored in-process and through the server with identical scores.

Skipped when PyTorch or transformers are absent (a plain `uv sync`); .ci/run installs both.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .conftest import REPO, demo_clips_with_one_broken, run_script

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from emolia_bench.errors import InputError  # noqa: E402
from emolia_bench.scorers.clap import ClapScorer, decode_audio, load_embedder, require  # noqa: E402
from emolia_bench.tiny_clap import build_tiny_clap  # noqa: E402

try:
    import sentence_transformers  # noqa: F401

    HAS_ST = True
except ImportError:
    HAS_ST = False

DATASET = REPO / "dataset"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_clap")
    st_dir = root / "st" if HAS_ST else None
    build_tiny_clap(root / "hf", seed=0, st_dir=st_dir)
    return {"hf": root / "hf", "st": st_dir}


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """12 demo clips of both subsets with 3 different prompts each way round (36 rows)."""
    clips = sorted(p.relative_to(DATASET).as_posix() for p in DATASET.rglob("*.mp3"))[::25][:12]
    prompts = ["Speech audio in which the speaker expresses or conveys Awe.", "Fast speech.",
               "Speech audio expressing the dimension 'Tempo' at level 3."]
    return pd.DataFrame([{"audio_path": c, "prompt": p} for c in clips for p in prompts])


def score(model: Path, rows: pd.DataFrame, cache: Path, **kw):
    scorer = ClapScorer(str(model), device="cpu", cache_dir=cache, **kw)
    result = scorer.score(rows, DATASET)
    return scorer, result


def test_similarity_is_the_cosine_of_the_two_embeddings_computed_by_hand(tiny, rows, tmp_path):
    _, result = score(tiny["hf"], rows, tmp_path / "c")
    assert result.similarity.shape == (len(rows),) and all(e is None for e in result.error)
    # by hand: the model's own processor and projection heads, cosine in numpy
    model = transformers.ClapModel.from_pretrained(tiny["hf"]).eval()
    proc = transformers.ClapProcessor.from_pretrained(tiny["hf"])
    for i in (0, 7, 20, 35):
        wave = decode_audio((DATASET / rows["audio_path"][i]).read_bytes(), 16_000, 2.0)
        with torch.no_grad():
            a = model.get_audio_features(**proc.feature_extractor([wave], sampling_rate=16_000, return_tensors="pt"))
            t = model.get_text_features(**proc.tokenizer([rows["prompt"][i]], return_tensors="pt"))
        a = getattr(a, "pooler_output", a)[0].numpy().astype(np.float64)
        t = getattr(t, "pooler_output", t)[0].numpy().astype(np.float64)
        assert a.shape == t.shape == (16,)  # projection_dim of the tiny config
        cosine = a @ t / (np.linalg.norm(a) * np.linalg.norm(t))
        assert result.similarity[i] == pytest.approx(cosine, abs=1e-5)
        assert -1.0 - 1e-6 <= result.similarity[i] <= 1.0 + 1e-6


def test_scores_do_not_depend_on_batch_size_and_runs_are_deterministic(tiny, rows, tmp_path):
    _, one = score(tiny["hf"], rows, tmp_path / "b1", audio_batch_size=1, text_batch_size=1)
    _, eight = score(tiny["hf"], rows, tmp_path / "b8", audio_batch_size=8, text_batch_size=8)
    _, again = score(tiny["hf"], rows, tmp_path / "b8again", audio_batch_size=8, text_batch_size=8)
    np.testing.assert_allclose(one.similarity, eight.similarity, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(eight.similarity, again.similarity)
    # a different batch composition: the same rows in reverse order
    _, rev = score(tiny["hf"], rows.iloc[::-1].reset_index(drop=True), tmp_path / "rev", audio_batch_size=5)
    np.testing.assert_allclose(rev.similarity[::-1], eight.similarity, atol=1e-5, rtol=0)


def test_each_clip_and_prompt_is_embedded_once_and_the_cache_is_reused(tiny, rows, tmp_path):
    first, r1 = score(tiny["hf"], rows, tmp_path / "cache")
    # 36 rows = 12 clips x 3 prompts: each embedded once, not once per row
    assert first.stats == {"texts_embedded": 3, "clips_embedded": 12, "cache_hits": 0}
    second, r2 = score(tiny["hf"], rows, tmp_path / "cache")
    assert second.stats == {"texts_embedded": 0, "clips_embedded": 0, "cache_hits": 12}
    np.testing.assert_array_equal(r1.similarity, r2.similarity)
    # --fresh ignores the cache
    third, _ = score(tiny["hf"], rows, tmp_path / "cache", fresh=True)
    assert third.stats["clips_embedded"] == 12


def test_an_undecodable_clip_is_an_error_row_not_a_crash(tiny, rows, tmp_path):
    broken = rows["audio_path"][0]
    data = demo_clips_with_one_broken(rows["audio_path"].unique(), broken, tmp_path / "data")
    scorer = ClapScorer(str(tiny["hf"]), device="cpu", cache_dir=tmp_path / "c")
    result = scorer.score(rows, data)
    bad = (rows["audio_path"] == broken).to_numpy()
    assert all(str(e).startswith("audio_undecodable") for e in np.array(result.error, dtype=object)[bad])
    assert np.isnan(result.similarity[bad]).all()
    assert all(e is None for e in np.array(result.error, dtype=object)[~bad])
    assert np.isfinite(result.similarity[~bad]).all()


def test_missing_dependency_and_bad_checkpoint_are_clean_errors(tmp_path):
    with pytest.raises(InputError, match="'clap' extra"):
        require("no_such_module_for_emolia")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="cannot load"):
        load_embedder(str(tmp_path / "empty"), "transformers", "cpu")
    for args in (("--model", tmp_path / "empty"), ("--model", "x", "--dataset-root", tmp_path / "nope")):
        r = run_script("clap_server.py", "--port", "0", *args, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("error:"), r.stderr


def test_model_errors_name_the_option_given_and_say_what_is_wrong(tmp_path):
    # a folder that does not exist is "folder not found", not a hub-id complaint, under the flag
    # the user typed (benchmark.py --clap-model, clap_server.py --model)
    r = run_script("benchmark.py", "--clap-model", tmp_path / "nope")
    assert r.returncode == 2 and r.stderr.strip() == f"error: --clap-model: {tmp_path / 'nope'}: folder not found"
    r = run_script("clap_server.py", "--model", "./no/such/ckpt")
    assert r.returncode == 2 and r.stderr.strip() == "error: --model: ./no/such/ckpt: folder not found"
    # a missing library: the install command for this project's environment, PyTorch from its own index
    with pytest.raises(InputError, match="uv sync --extra clap.*download.pytorch.org/whl/cpu"):
        require("no_such_module_for_emolia")
    with pytest.raises(InputError, match='uv pip install "sentence-transformers>=6"'):
        require("sentence_transformers.no_such_part")


@pytest.mark.skipif(not HAS_ST, reason="sentence-transformers not installed")
def test_sentence_transformers_backend_scores_like_the_transformers_backend(tiny, rows, tmp_path):
    st_scorer, st = score(tiny["st"], rows, tmp_path / "st")
    assert st_scorer.backend == "sentence-transformers"  # auto: the folder has modules.json
    hf_scorer, hf = score(tiny["hf"], rows, tmp_path / "hf")
    assert hf_scorer.backend == "transformers"
    # the same weights behind two loaders: the same cosine
    np.testing.assert_allclose(st.similarity, hf.similarity, atol=1e-5, rtol=0)
    _, st1 = score(tiny["st"], rows, tmp_path / "st1", audio_batch_size=1, text_batch_size=1)
    np.testing.assert_allclose(st1.similarity, st.similarity, atol=1e-5, rtol=0)


def test_demo_scored_in_process_and_through_clap_server_gives_identical_scores(tiny, tmp_path, demo_scored):
    # 120 rows a subset, the same seeded sample both ways (demo.py checks every row of the demo in CI)
    an = demo_scored / "an"
    r = run_script("benchmark.py", "--no-figures", "--analysis-root", an, "--output-dir", tmp_path / "inproc",
                   "--clap-model", tiny["hf"], "--clap-device", "cpu", "--cache-dir", tmp_path / "c1", "--limit", "120",
                   timeout=600)
    assert r.returncode == 0, r.stderr
    server = subprocess.Popen([sys.executable, str(REPO / "clap_server.py"), "--model", str(tiny["hf"]), "--port", "0",
                               "--device", "cpu", "--max-batch", "8", "--dataset-root", str(DATASET)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        line = server.stdout.readline()
        assert "http://" in line, server.stderr.read()
        url = line.split()[-1]
        r = run_script("benchmark.py", "--no-figures", "--analysis-root", an, "--output-dir",
                       tmp_path / "served", "--endpoint", url, "--workers", "8", "--cache-dir", tmp_path / "c2",
                       "--limit", "120", timeout=600)
        assert r.returncode == 0, r.stderr
        # the server's contract and path safety, like the sham server's
        import requests

        base = url.rsplit("/v1/", 1)[0]
        assert requests.get(base + "/health", timeout=10).status_code == 200
        assert requests.post(base + "/v1/nothing", json={"text": "x"}, timeout=10).status_code == 404
        assert requests.post(url, data=b"{not json", timeout=10).status_code == 400
        assert requests.post(url, json={"text": 3, "audio_path": "x.mp3"}, timeout=10).status_code == 400
        # malformed requests get a JSON error with the right status, and the server stays up
        assert requests.post(url, data=b"[" * 3000 + b"]" * 3000, timeout=10).json()["error"] == "body is nested too deeply"
        long_path = requests.post(url, json={"text": "x", "audio_path": "/".join(["b" * 200] * 40) + "/c.mp3"}, timeout=10)
        assert long_path.status_code == 400 and "error" in long_path.json()
        put = requests.put(url, json={"text": "x"}, timeout=10)
        assert put.status_code == 405 and "error" in put.json()
        assert "error" in requests.post(base + "/v1/nothing", json={"text": "x"}, timeout=10).json()
        for escape in ("../pyproject.toml", "/etc/passwd", "emolia-emo/../../pyproject.toml"):
            bad = requests.post(url, json={"text": "x", "audio_path": escape}, timeout=10)
            assert bad.status_code == 400 and "tool.pytest" not in bad.text, escape
        # audio read by the server from its dataset root = audio sent as base64
        first = pd.read_csv(tmp_path / "served" / "emolia-dim" / "predictions.csv").iloc[0]
        rel = first["audio_path"].split("dataset/", 1)[1]
        by_path = requests.post(url, json={"text": first["prompt"], "audio_path": rel}, timeout=30).json()["similarity"]
        assert by_path == pytest.approx(first["similarity"], abs=1e-5)
    finally:
        server.terminate()
        server.wait(20)
    for subset in ("emolia-emo", "emolia-dim"):
        a = pd.read_csv(tmp_path / "inproc" / subset / "predictions.csv")
        b = pd.read_csv(tmp_path / "served" / subset / "predictions.csv")
        assert len(a) == len(b) > 100 and a["ok"].all() and b["ok"].all()
        np.testing.assert_allclose(a["similarity"], b["similarity"], atol=1e-5, rtol=0)
        assert (a["pred_present"] == b["pred_present"]).mean() > 0.99  # only ties at the threshold may differ


def test_a_hub_that_never_answers_is_bad_input_in_seconds(monkeypatch, tmp_path):
    # a socket that accepts and never answers, as the hub: without a bound the hub library
    # retries for minutes behind a progress bar at 0
    import socket
    import time

    from emolia_bench.scorers import clap

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached
        start = time.monotonic()
        with pytest.raises(InputError, match="--model: cannot reach the Hugging Face hub for 'someorg/somemodel' within 1 s"):
            clap.check_hub("someorg/somemodel", "--model", timeout=1,
                           endpoint=f"http://127.0.0.1:{silent.getsockname()[1]}")
        assert time.monotonic() - start < 10
    # load_embedder asks the hub first for a hub id, under the flag the user gave
    asked = []
    monkeypatch.setattr(clap, "check_hub", lambda model, flag: asked.append((model, flag)) or (_ for _ in ()).throw(
        InputError(flag, "stop here")))
    with pytest.raises(InputError, match="--clap-model: stop here"):
        load_embedder("someorg/somemodel")
    assert asked == [("someorg/somemodel", "--clap-model")]
