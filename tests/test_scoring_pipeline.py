"""The in-process scorer's pipeline on tiny models (no download): decode workers, the batch plan,
the attention option, the migrated JSONL cache, and torchrun on CPU (gloo) — two ranks write
predictions byte-identical to one process, a re-run with one rank embeds nothing, and a rank
killed mid-run leaves its finished vectors for the re-run.

Skipped when PyTorch or transformers are absent (a plain `uv sync`); .ci/run installs both.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .conftest import REPO, demo_clips_with_one_broken, run_script

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from emolia_bench.distributed import Ranks  # noqa: E402
from emolia_bench.errors import InputError  # noqa: E402
from emolia_bench.scorers.clap import ClapScorer, batch_plan, load_embedder  # noqa: E402
from emolia_bench.tiny_clap import build_tiny_clap, build_tiny_voiceclap  # noqa: E402

DATASET = REPO / "dataset"


try:
    import sentence_transformers  # noqa: F401

    HAS_ST = True
except ImportError:
    HAS_ST = False


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"clap": build_tiny_clap(root / "clap", st_dir=root / "st" if HAS_ST else None), "st": root / "st",
            "rc": build_tiny_voiceclap(root / "rc"),
            "attention": build_tiny_voiceclap(root / "attention", attention_heads=2),
            # the stand-in: a fixed 50 ms per forward pass, so a run lasts long enough to be killed
            "slow": build_tiny_voiceclap(root / "slow", seconds_per_batch=0.05)}


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    clips = sorted(p.relative_to(DATASET).as_posix() for p in DATASET.rglob("*.mp3"))[::10][:30]
    return pd.DataFrame([{"audio_path": c, "prompt": p} for c in clips for p in ("Awe.", "Fast speech.")])


def score(model: Path, rows, cache: Path, **kw):
    scorer = ClapScorer(str(model), device="cpu", cache_dir=cache, trust_remote_code=True, **kw)
    return scorer, scorer.score(rows, DATASET)


def test_the_batch_plan_gives_batch_j_to_rank_j_mod_world():
    # by hand: 7 clips in batches of 3 are [0,1,2], [3,4,5], [6]; two ranks take 0 and 2, then 1
    assert batch_plan(7, 3, Ranks()) == [[0, 1, 2], [3, 4, 5], [6]]
    assert batch_plan(7, 3, Ranks(rank=0, world=2, local_world=2)) == [[0, 1, 2], [6]]
    assert batch_plan(7, 3, Ranks(rank=1, world=2, local_rank=1, local_world=2)) == [[3, 4, 5]]
    assert batch_plan(0, 3, Ranks()) == []


@pytest.mark.parametrize("model", ["clap", "rc", "st"])
def test_scores_do_not_depend_on_the_decode_workers_and_match_batch_size_one(models, rows, tmp_path, model):
    if model == "st" and not HAS_ST:
        pytest.skip("sentence-transformers is not installed")
    _, serial = score(models[model], rows, tmp_path / "w0", decode_workers=0, audio_batch_size=8)
    scorer, workers = score(models[model], rows, tmp_path / "w2", decode_workers=2, audio_batch_size=8)
    assert scorer.stats["clips_embedded"] == 30 and all(e is None for e in workers.error)
    # the same batches whoever decodes them: identical to the last bit
    np.testing.assert_array_equal(serial.similarity, workers.similarity)
    _, single = score(models[model], rows.iloc[::-1].reset_index(drop=True), tmp_path / "b1", decode_workers=2,
                      audio_batch_size=1)
    np.testing.assert_allclose(single.similarity[::-1], serial.similarity, atol=1e-5, rtol=0)
    # the split of the time is filled in: workers decoded, the model ran
    assert scorer.seconds["decode"] > 0 and scorer.seconds["model"] > 0


def test_an_undecodable_clip_in_a_worker_is_its_own_error(models, rows, tmp_path):
    broken = rows["audio_path"][2]
    data = demo_clips_with_one_broken(rows["audio_path"].unique(), broken, tmp_path / "data")
    scorer = ClapScorer(str(models["rc"]), device="cpu", cache_dir=tmp_path / "c", trust_remote_code=True,
                        decode_workers=2, audio_batch_size=4)
    result = scorer.score(rows, data)
    bad = (rows["audio_path"] == broken).to_numpy()
    assert all(str(e).startswith("audio_undecodable") for e in np.array(result.error, dtype=object)[bad])
    assert np.isfinite(result.similarity[~bad]).all() and scorer.stats["clips_embedded"] == 29


def test_sdpa_attention_is_opt_in_close_to_eager_and_refused_where_the_checkpoint_lacks_it(models, rows, tmp_path):
    _, eager = score(models["attention"], rows, tmp_path / "e", attention="eager")
    scorer, sdpa = score(models["attention"], rows, tmp_path / "s", attention="sdpa")
    assert scorer.info()["attention"] == "sdpa" and scorer.cache_path.name.endswith("-sdpa")
    assert np.abs(sdpa.similarity - eager.similarity).max() < 1e-5
    with pytest.raises(InputError, match="does not support an attention implementation"):
        load_embedder(str(models["clap"]), device="cpu", attention="sdpa")


def test_an_earlier_versions_jsonl_cache_is_migrated_and_nothing_is_embedded_again(models, rows, tmp_path):
    first, fresh = score(models["rc"], rows, tmp_path / "new")
    folder = first.cache_folder()
    # the earlier format, written by hand from the binary cache's vectors: one JSON line per key
    from emolia_bench.vector_store import VectorStore

    store = VectorStore(folder, writer=9)
    old = tmp_path / "old" / f"{folder.name}.jsonl"
    old.parent.mkdir()
    keys = ["t:" + hashlib.sha256(p.encode()).hexdigest() for p in rows["prompt"].unique()]
    keys += ["a:" + hashlib.sha256((DATASET / rel).read_bytes()).hexdigest() for rel in rows["audio_path"].unique()]
    old.write_text("".join(json.dumps({"k": k, "v": base64.b64encode(np.asarray(store.get(k)).tobytes()).decode()}) + "\n"
                           for k in keys))
    store.close()
    second, migrated = score(models["rc"], rows, tmp_path / "old")
    assert second.stats == {"texts_embedded": 0, "clips_embedded": 0, "cache_hits": 30}
    np.testing.assert_array_equal(migrated.similarity, fresh.similarity)


def test_bad_device_workers_and_torchrun_environment_are_exit_2(demo_scored, tmp_path, monkeypatch):
    base = ["--analysis-root", demo_scored / "an", "--output-dir", tmp_path / "out"]
    for extra, message in ((["--clap-model", "x", "--clap-device", "gpu0"], "--clap-device 'gpu0'"),
                           (["--clap-model", "x", "--clap-decode-workers", "-1"], "--clap-decode-workers")):
        r = run_script("benchmark.py", *base, *extra)
        assert r.returncode == 2 and message in r.stderr
    with monkeypatch.context() as env:
        env.setenv("WORLD_SIZE", "2")
        env.setenv("RANK", "0")
        r = run_script("benchmark.py", *base)  # the sham scorer is one process: not under torchrun
        assert r.returncode == 2 and "give --model or --clap-model" in r.stderr
        env.setenv("RANK", "5")
        r = run_script("benchmark.py", *base, "--clap-model", "x")
        assert r.returncode == 2 and "inconsistent torchrun environment: RANK=5" in r.stderr
    assert Ranks.from_environment({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}).local_world == 2
    with pytest.raises(ValueError, match="RANK=2"):
        Ranks.from_environment({"WORLD_SIZE": "2", "RANK": "2"})
    with pytest.raises(ValueError, match="not an integer"):
        Ranks.from_environment({"WORLD_SIZE": "two"})
    assert not (tmp_path / "out").exists()


# --- torchrun on CPU -----------------------------------------------------------------------------

def benchmark(demo_scored, out: Path, cache: Path, model: Path, ranks: int = 1, batch: int = 8, wait: bool = True,
              extra: tuple = ()):
    """benchmark.py on the demo's emolia-emo rows, in-process, as one process or under torchrun."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"] if ranks > 1 \
        else [sys.executable]
    cmd = [*launcher, str(REPO / "benchmark.py"), "--analysis-root", str(demo_scored / "an"), "--subset", "emolia-emo",
           "--dataset-root", str(DATASET), "--output-dir", str(out), "--clap-model", str(model), "--trust-remote-code",
           "--clap-device", "cpu", "--cache-dir", str(cache), "--clap-audio-batch-size", str(batch), "--no-figures",
           "--bootstrap-draws", "100", *extra]
    # torchrun gives each rank one intra-op thread; the single process gets the same, since on CPU
    # the thread count moves the last bits of some batch shapes (docs/models.md)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return embedded(r.stdout)


def embedded(stdout: str) -> tuple[int, int]:
    """(clips, prompts) embedded, from the scorer's summary line."""
    m = re.search(r"(\d+) clips and (\d+) prompts embedded", stdout)
    assert m, stdout
    return int(m[1]), int(m[2])


def test_torchrun_two_ranks_write_predictions_byte_identical_to_one_process_and_resume_with_one(
        demo_scored, models, tmp_path):
    one = benchmark(demo_scored, tmp_path / "one", tmp_path / "c1", models["rc"])
    two = benchmark(demo_scored, tmp_path / "two", tmp_path / "c2", models["rc"], ranks=2)
    clips = len({(DATASET / p).read_bytes() for p in pd.read_csv(tmp_path / "one/emolia-emo/predictions.csv")["audio_path"]})
    assert one == two and one[0] == clips  # every distinct clip embedded once, over both ranks together
    pred = "emolia-emo/predictions.csv"
    assert (tmp_path / "one" / pred).read_bytes() == (tmp_path / "two" / pred).read_bytes()
    shards = sorted(p.name for p in (tmp_path / "c2").glob("embeddings-*/shard-*.bin"))
    assert shards == ["shard-0.bin", "shard-1.bin"]
    # the 2-rank cache, re-read by one process: nothing to embed, the same bytes
    assert benchmark(demo_scored, tmp_path / "again", tmp_path / "c2", models["rc"]) == (0, 0)
    assert (tmp_path / "again" / pred).read_bytes() == (tmp_path / "one" / pred).read_bytes()


def test_a_killed_rank_leaves_its_finished_vectors_and_only_the_unfinished_clips_are_embedded_again(
        demo_scored, models, tmp_path):
    model, cache = models["slow"], tmp_path / "cache"
    clips, prompts = benchmark(demo_scored, tmp_path / "whole", tmp_path / "whole-cache", model, batch=2)
    run = benchmark(demo_scored, tmp_path / "killed", cache, model, ranks=2, batch=2, wait=False)
    record = 32 + 16 * 4 + 4  # key digest, 16 float32, CRC
    shard = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # rank 1 has embedded 10 clips (5 batches of its 75): kill it
        found = list(cache.glob("embeddings-*/shard-1.bin"))
        if found and found[0].stat().st_size >= 16 + 10 * record:
            shard = found[0]
            break
        time.sleep(0.01)
    assert shard is not None, "rank 1 never started embedding"
    os.kill(int(Path(f"{shard}.lock").read_text()), signal.SIGKILL)
    _, err = run.communicate(timeout=120)
    assert run.returncode != 0 and not (tmp_path / "killed").exists()  # nothing evaluated, nothing written
    finished = {p.name: (p.stat().st_size - 16) // record for p in shard.parent.glob("shard-*.bin")}
    assert 10 <= finished["shard-1.bin"] < clips // 2  # the dead rank's finished vectors are on disk
    audio_done = finished["shard-0.bin"] - prompts + finished["shard-1.bin"]
    resumed = benchmark(demo_scored, tmp_path / "resumed", cache, model, batch=2)
    assert resumed == (clips - audio_done, 0)  # only the clips no rank finished are embedded again
    a = pd.read_csv(tmp_path / "whole/emolia-emo/predictions.csv")
    b = pd.read_csv(tmp_path / "resumed/emolia-emo/predictions.csv")
    assert b["similarity"].notna().all()
    np.testing.assert_allclose(b["similarity"], a["similarity"], atol=1e-5, rtol=0)


def test_bench_gpu_runs_in_one_command_and_counts_ranking_changes_by_hand():
    sys.path.insert(0, str(REPO / "bench"))
    from bench_gpu import ranking_changes

    ref = np.array([[0.1, 0.5], [0.2, 0.4], [0.3, 0.3]])  # prompt 0 ranks clips 2 > 1 > 0; prompt 1 ranks 0 > 1 > 2
    other = np.array([[0.25, 0.5], [0.2, 0.4], [0.3, 0.3]])  # clip 0 passes clip 1 under prompt 0 only
    assert ranking_changes(ref, ref) == (0, 0) and ranking_changes(ref, other) == (1, 1)
    r = subprocess.run([sys.executable, str(REPO / "bench" / "bench_gpu.py"), "--clips", "24", "--seconds", "1",
                        "--workers", "0", "2", "--batch-sizes", "8", "--skip", "numerics"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 workers reach" in r.stdout and r.stdout.count("tiny CLAP") == 2 and r.stdout.count("tiny remote-code") == 2
