"""The remote-code backend on a tiny VoiceCLAP-shaped model saved with its own modelling file
and an ``auto_map`` (``tiny_clap.build_tiny_voiceclap``), loaded with trust_remote_code from a
local folder: encode_text / encode_waveform, batch independence, ``--similarity logit`` against
scale·cos + bias computed by hand, template ensembles against the hand-computed mean of text
embeddings, the refusal of ``logit`` for a model without a learned bias, and clap_server.py
serving the same numbers. Expected values come from calling the model's own methods directly
with torch here (padding each clip by hand), not from our embedder.

Skipped when PyTorch or transformers are absent; .ci/run installs both.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .conftest import REPO, run_script

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from emolia_bench.errors import InputError  # noqa: E402
from emolia_bench.scorers.clap import ClapScorer, decode_audio, load_embedder  # noqa: E402
from emolia_bench.templates import score_templates  # noqa: E402
from emolia_bench.tiny_clap import build_tiny_clap, build_tiny_voiceclap  # noqa: E402

DATASET = REPO / "dataset"
TEMPLATES = ["Speech audio in which the speaker expresses or conveys {emotion}.", "A voice full of {emotion}.",
             "{emotion}"]


@pytest.fixture(scope="module")
def rc(tmp_path_factory) -> Path:
    return build_tiny_voiceclap(tmp_path_factory.mktemp("tiny_rc") / "rc", seed=0)


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """16 demo clips (of different lengths) × 2 prompts."""
    clips = sorted(p.relative_to(DATASET).as_posix() for p in DATASET.rglob("*.mp3"))[::20][:16]
    return pd.DataFrame([{"audio_path": c, "prompt": p, "item_stem": Path(c).stem}
                         for c in clips for p in ("Speech audio in which the speaker expresses or conveys Awe.", "Calm.")])


def by_hand(rc: Path, clips: list[str], texts: list[str]) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Audio and text embeddings straight from the model's methods, one clip and one text at a
    time (no batching at all), each clip's first 2 s zero-padded to the 2 s window by hand."""
    model = transformers.AutoModel.from_pretrained(rc, trust_remote_code=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(rc, trust_remote_code=True)
    window = int(model.config.max_audio_seconds * model.config.sampling_rate)
    audio, text = [], []
    with torch.no_grad():
        for c in clips:
            wave = decode_audio((DATASET / c).read_bytes(), 16_000, 2.0)
            padded = np.zeros((1, window), dtype=np.float32)
            padded[0, :len(wave)] = wave
            audio.append(model.encode_waveform(torch.from_numpy(padded))[0].numpy())
        for t in texts:
            ids = tok([t], return_tensors="pt")
            text.append(model.encode_text(ids["input_ids"], ids["attention_mask"])[0].numpy())
    return np.array(audio, np.float64), np.array(text, np.float64), float(model.logit_scale.detach()), float(model.logit_bias.detach())


def score(rc: Path, rows: pd.DataFrame, cache: Path, **kw):
    scorer = ClapScorer(str(rc), device="cpu", cache_dir=cache, trust_remote_code=True, **kw)
    return scorer, scorer.score(rows, DATASET)


def test_auto_picks_remote_code_and_the_model_is_loaded_through_its_own_code(rc):
    e = load_embedder(str(rc), "auto", "cpu", trust_remote_code=True)
    assert type(e).__name__ == "RemoteCodeEmbedder" and type(e.model).__name__ == "TinyVoiceClapModel"
    assert e.rate == 16_000 and e.window == 32_000 and e.max_seconds == 2.0  # from the checkpoint's config
    with pytest.raises(InputError, match="--trust-remote-code"):
        load_embedder(str(rc), "auto", "cpu")


def test_cosine_and_logit_equal_the_hand_computation(rc, rows, tmp_path):
    clips, texts = rows["audio_path"].tolist(), rows["prompt"].tolist()
    audio, text, log_scale, bias = by_hand(rc, sorted(set(clips)), sorted(set(texts)))
    a = dict(zip(sorted(set(clips)), audio, strict=True))
    t = dict(zip(sorted(set(texts)), text, strict=True))
    cos = np.array([a[c] @ t[p] for c, p in zip(clips, texts, strict=True)])
    _, cosine = score(rc, rows, tmp_path / "c")
    np.testing.assert_allclose(cosine.similarity, cos, atol=1e-5, rtol=0)
    _, logit = score(rc, rows, tmp_path / "c", similarity="logit")  # embeddings from the cache, scale from the model
    np.testing.assert_allclose(logit.similarity, math.exp(log_scale) * cos + bias, atol=1e-4, rtol=0)
    assert math.exp(log_scale) == pytest.approx(10.0, rel=1e-5) and bias == -1.5  # the builder's values


def test_scores_do_not_depend_on_batch_size_or_composition(rc, rows, tmp_path):
    _, one = score(rc, rows, tmp_path / "b1", audio_batch_size=1)
    _, eight = score(rc, rows, tmp_path / "b8", audio_batch_size=8)
    shuffled = rows.iloc[::-1].reset_index(drop=True)  # other clips share each batch
    _, mixed = score(rc, shuffled, tmp_path / "b3", audio_batch_size=3)
    worst = float(np.max(np.abs(one.similarity - eight.similarity)))
    print(f"batch 1 vs 8: max |diff| {worst:.2e}")  # quoted in the README
    assert worst <= 1e-5
    np.testing.assert_allclose(mixed.similarity[::-1], one.similarity, atol=1e-5, rtol=0)


def test_template_ensemble_equals_the_mean_text_embedding(rc, rows, tmp_path):
    """The ensemble of three templates = <a, mean_k t_k> with the text embeddings of the three
    filled-in prompts computed by hand (not re-normalised: the module docstring says why)."""
    base = rows.drop_duplicates("audio_path").reset_index(drop=True)
    prompts = [pd.Series([t.format(emotion="Awe")] * len(base)) for t in TEMPLATES]
    scorer = ClapScorer(str(rc), device="cpu", cache_dir=tmp_path / "c", trust_remote_code=True)
    result, per_template = score_templates(scorer, base, prompts, DATASET)
    audio, text, _, _ = by_hand(rc, base["audio_path"].tolist(), [p.iloc[0] for p in prompts])
    np.testing.assert_allclose(result.similarity, audio @ text.mean(axis=0), atol=1e-5, rtol=0)
    for k in range(3):
        np.testing.assert_allclose(per_template[k], audio @ text[k], atol=1e-5, rtol=0)
    # adding a template costs only its text: every clip came from the cache the second time
    scorer.stats.update(texts_embedded=0, clips_embedded=0)
    score_templates(scorer, base, [*prompts, pd.Series(["Awe, clearly."] * len(base))], DATASET)
    assert scorer.stats["clips_embedded"] == 0 and scorer.stats["texts_embedded"] == 1


def test_logit_is_refused_for_a_model_without_a_learned_bias(tmp_path, rows):
    clap = build_tiny_clap(tmp_path / "clap", seed=0)  # CLAP: temperatures, no bias
    scorer = ClapScorer(str(clap), device="cpu", cache_dir=tmp_path / "c", similarity="logit")
    with pytest.raises(InputError, match="logit_bias.*--similarity cosine") as e:
        scorer.score(rows.head(2), DATASET)
    assert str(clap) in str(e.value)


def test_clap_server_serves_the_same_logits(rc, rows, tmp_path):
    import requests

    _, local = score(rc, rows, tmp_path / "c", similarity="logit")
    server = subprocess.Popen([sys.executable, str(REPO / "clap_server.py"), "--model", str(rc), "--port", "0",
                               "--device", "cpu", "--trust-remote-code", "--similarity", "logit",
                               "--dataset-root", str(DATASET)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert "http://" in line, server.stderr.read()
        url = line.split()[-1]
        got = [requests.post(url, json={"text": p, "audio_path": c}, timeout=60).json()["similarity"]
               for c, p in zip(rows["audio_path"], rows["prompt"], strict=True)]
        assert requests.get(url.rsplit("/v1/", 1)[0] + "/health", timeout=10).json()["similarity"] == "logit"
    finally:
        server.terminate()
        server.wait(20)
    np.testing.assert_allclose(got, local.similarity, atol=1e-4, rtol=0)
    # without --trust-remote-code the server refuses to start: exit 2, the reason named
    refused = run_script("clap_server.py", "--model", rc, "--port", "0")
    assert refused.returncode == 2 and "--trust-remote-code" in refused.stderr


def test_logit_is_refused_when_the_learned_scale_is_not_finite():
    # log-scale 1000: exp overflows a float (was an OverflowError traceback); a NaN bias likewise
    from types import SimpleNamespace

    from emolia_bench.scorers.clap import similarity_transform

    for log_scale, bias in ((1000.0, 0.0), (1.0, float("nan"))):
        module = torch.nn.Module()
        module.logit_scale = torch.nn.Parameter(torch.tensor(log_scale))
        module.logit_bias = torch.nn.Parameter(torch.tensor(bias))
        with pytest.raises(InputError, match="finite learned scale and bias.*--similarity cosine"):
            similarity_transform(SimpleNamespace(torch_module=module, name="odd-model"), "logit")
