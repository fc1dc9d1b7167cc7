"""The in-process scorer's throughput where users wait: clips/s end to end, where the time goes,
and what faster numerics cost in accuracy. One command on any machine:

    uv run bench/bench_gpu.py                                   # CPU: tiny models and the stand-in
    uv run bench/bench_gpu.py --device cuda --model PATH_OR_ID [--trust-remote-code]

Clips are synthetic (a tone under noise, 22.05 kHz 16-bit WAV, so every clip is decoded and
resampled to the model's 16 kHz) — ``--clips N`` of ``--seconds`` each — plus the committed
demo's 300 MP3 clips for the numerics. Every run embeds every clip afresh (a new cache folder),
with the model loaded and warmed once beforehand: load time is not throughput.

1. **Overlap** (the stand-in): a tiny remote-code model whose forward pass sleeps a fixed time
   per batch, set to ``--standin-factor`` (2) × one worker's measured decode time for a batch.
   Its own rate (forward passes alone on decoded batches) is the reference; the scorer with 0
   decode workers should reach what serial decoding gives, B / (decode + forward), and with 2
   workers ≥ 90 % of the stand-in's own rate (the model never waits).
2. **Grid**: for each model (the tiny CLAP and tiny remote-code on CPU, or ``--model``), decode
   workers × batch sizes × dtypes: clips/s, the ratio to 0 workers at the same batch and dtype,
   and the time split — hash (reading and hashing every clip for the cache key), decode (the workers' own seconds, summed over workers), wait (the model
   waiting for a batch), transfer, model, cache. On CUDA the split comes from a second run that
   synchronises around each phase, and the GPU's utilisation is sampled (nvidia-smi) during the
   unsynchronised one.
3. **Numerics**: every dtype and attention implementation against float32 with eager attention
   on the demo and the synthetic clips, each clip against a handful of prompts: the largest
   |Δcos|, and how many prompts' rankings of the clips change (any pair swapped) and how many
   pairs swap.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import machine_speed, table  # noqa: E402
from synth import write_synthetic_audio  # noqa: E402

PHASES = ("hash", "decode", "wait", "transfer", "model", "cache")
PROMPTS = ["Speech audio in which the speaker expresses or conveys Joy.", "A calm, slow voice.",
           "Fast speech with a high pitch.", "Speech audio in which the speaker expresses or conveys Anger.",
           "A whisper."]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--model", action="append", metavar="PATH_OR_ID",
                   help="a checkpoint to measure, repeatable (default: the tiny CLAP and tiny remote-code models)")
    p.add_argument("--trust-remote-code", action="store_true", help="let --model checkpoints run their own code")
    p.add_argument("--clips", type=int, default=1000, help="synthetic clips per run (default: 1000)")
    p.add_argument("--seconds", type=float, default=3.0, help="length of each synthetic clip (default: 3)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4, 8], help="decode workers (default: 0 2 4 8)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32], help="clips per forward pass (default: 8 32)")
    p.add_argument("--dtypes", nargs="+", default=None,
                   help="dtypes of the grid (default: float32 on CPU; float32 bfloat16 float16 on CUDA)")
    p.add_argument("--standin-factor", type=float, default=2.0,
                   help="the stand-in's seconds per batch as a multiple of one worker's decode time (default: 2)")
    p.add_argument("--skip", nargs="*", default=[], choices=["overlap", "grid", "numerics"], help="sections to skip")
    args = p.parse_args()
    cuda = args.device.startswith("cuda")
    dtypes = args.dtypes or (["float32", "bfloat16", "float16"] if cuda else ["float32"])

    import warnings

    import torch

    from emolia_bench.tiny_clap import build_tiny_clap, build_tiny_voiceclap

    # the grid asks for more decode workers than a small machine has cores, on purpose
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    print(f"machine: {machine_speed()}; torch {torch.__version__}, {torch.get_num_threads()} threads; device {args.device}"
          + (f" ({torch.cuda.get_device_name(torch.device(args.device))})" if cuda else ""))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        clips = [f"synth/{i:05d}.wav" for i in range(args.clips)]
        write_synthetic_audio([tmp / c for c in clips], seconds=(args.seconds, args.seconds))
        for c in sorted((REPO / "dataset").rglob("*.mp3")):  # the demo's clips, beside them
            (tmp / "demo" / c.relative_to(REPO / "dataset")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(c, tmp / "demo" / c.relative_to(REPO / "dataset"))
        demo = sorted(p.relative_to(tmp).as_posix() for p in (tmp / "demo").rglob("*.mp3"))
        print(f"clips: {len(clips)} synthetic ({args.seconds:g} s, 22.05 kHz WAV) and {len(demo)} demo MP3s (1-2 s, 16 kHz)")
        if args.model:
            models = [(m, m, args.trust_remote_code) for m in args.model]
        else:
            models = [("tiny CLAP", str(build_tiny_clap(tmp / "m/clap")), False),
                      ("tiny remote-code", str(build_tiny_voiceclap(tmp / "m/rc", max_audio_seconds=args.seconds)), True)]
        if "overlap" not in args.skip:
            overlap(tmp, clips, args)
        if "grid" not in args.skip:
            grid(tmp, clips, models, args, dtypes)
        if "numerics" not in args.skip:
            numeric_models = models if args.model else [
                ("tiny remote-code with attention", str(build_tiny_voiceclap(tmp / "m/att", attention_heads=2,
                                                                             max_audio_seconds=args.seconds)), True)]
            numerics(tmp, clips, demo, numeric_models, args, dtypes if cuda else ["float32", "bfloat16"])


def rows_for(clips: list[str], prompts: list[str]):
    import pandas as pd

    return pd.DataFrame([{"audio_path": c, "prompt": p} for c in clips for p in prompts])


def scorer_for(model: str, trust: bool, device: str, dtype: str = "float32", batch: int = 8, workers: int = 0,
               attention: str = "auto"):
    from emolia_bench.scorers.clap import ClapScorer

    return ClapScorer(model, device=device, dtype=dtype, audio_batch_size=batch, decode_workers=workers,
                      trust_remote_code=trust, attention=attention, max_seconds=30.0)


def timed_run(scorer, rows, root: Path, cache: Path):
    """Seconds to score ``rows`` with a fresh cache folder (the model already loaded), and the result."""
    scorer.cache_dir = cache
    scorer.stats = {"texts_embedded": 0, "clips_embedded": 0, "cache_hits": 0}
    scorer.seconds = dict.fromkeys(scorer.seconds, 0.0)
    started = time.perf_counter()
    result = scorer.score(rows, root)
    return time.perf_counter() - started, result


def warm(scorer, rows, root: Path, tmp: Path) -> None:
    timed_run(scorer, rows.head(2 * scorer.audio_batch_size), root, tmp / f"warm-{time.monotonic_ns()}")


def overlap(tmp: Path, clips: list[str], args) -> None:
    """The done-when check: the stand-in at a fixed time per batch, 0 and 2 decode workers, for
    each batch size."""
    import hashlib

    from emolia_bench.audio_loader import ClipInputs, collate
    from emolia_bench.scorers.clap import load_embedder
    from emolia_bench.tiny_clap import build_tiny_voiceclap

    rows = rows_for(clips, PROMPTS[:1])
    probe = load_embedder(str(build_tiny_voiceclap(tmp / "m/probe", max_audio_seconds=args.seconds)), device=args.device,
                          trust_remote_code=True)
    jobs = [("a:" + hashlib.sha256((tmp / c).read_bytes()).hexdigest(), c) for c in clips]
    dataset = ClipInputs(jobs, tmp, probe.prep)
    collate([dataset[i] for i in range(8)])  # the decoders' first call may still set things up: not decode time
    print(f"\n## Overlap: the stand-in at {args.standin_factor:g} x one worker's decode time per batch\n")
    records, verdicts = [], []
    for batch in args.batch_sizes:
        started = time.perf_counter()
        decoded = [collate([dataset[i] for i in range(j, min(j + batch, len(jobs)))]) for j in range(0, len(jobs), batch)]
        decode = (time.perf_counter() - started) / len(decoded)  # one worker's seconds per batch
        standin = str(build_tiny_voiceclap(tmp / f"m/standin-{batch}", seconds_per_batch=args.standin_factor * decode,
                                           max_audio_seconds=args.seconds))
        model = load_embedder(standin, device=args.device, trust_remote_code=True)
        model.audio_vectors(model.to_device(decoded[0]["inputs"]))
        started = time.perf_counter()
        for b in decoded:  # every batch of the run, once: the stand-in's time on this very workload
            model.audio_vectors(model.to_device(b["inputs"]))
        forward = (time.perf_counter() - started) / len(decoded)
        # the stand-in's own rate on this workload: every batch, the last partial one too, costs a forward pass
        own, serial = len(clips) / (len(decoded) * forward), len(clips) / (len(decoded) * (decode + forward))
        for workers in (0, 2):
            scorer = scorer_for(standin, True, args.device, batch=batch, workers=workers)
            warm(scorer, rows, tmp, tmp)
            rate = len(clips) / timed_run(scorer, rows, tmp, tmp / f"overlap-{batch}-{workers}")[0]
            records.append({"batch": batch, "decode ms/batch": f"{decode * 1000:.1f}",
                            "stand-in ms/batch": f"{forward * 1000:.1f}", "stand-in's own clips/s": f"{own:.1f}",
                            "serial clips/s": f"{serial:.1f}", "decode workers": workers, "clips/s": f"{rate:.1f}",
                            "÷ stand-in's own": f"{rate / own:.3f}", "÷ serial": f"{rate / serial:.3f}",
                            "wait s": f"{scorer.seconds['wait']:.2f}"})
            if workers == 2:
                verdicts.append(f"batch {batch}: 2 workers reach {rate / own:.1%} of the stand-in's own rate "
                                f"({'met' if rate / own >= 0.9 else 'not met'}: target >= 90 %)")
    print(table(records, ["batch", "decode ms/batch", "stand-in ms/batch", "stand-in's own clips/s", "serial clips/s",
                          "decode workers", "clips/s", "÷ stand-in's own", "÷ serial", "wait s"]))
    print("\n" + "; ".join(verdicts) + ". The stand-in's own rate = clips / (batches x its forward time), the last "
          "partial batch included; serial = clips / (batches x (decode + forward)), what 0 workers should give.")


def gpu_utilisation(device: str):
    """Start sampling the GPU's utilisation (nvidia-smi, every 0.2 s); the returned function stops
    and gives the mean %, or None where nvidia-smi cannot say."""
    index = device.split(":")[1] if ":" in device else "0"
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                      "-i", index], capture_output=True, text=True, timeout=5)
                samples.append(float(out.stdout.strip()))
            except (OSError, ValueError, subprocess.SubprocessError):
                return
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def finish():
        stop.set()
        thread.join(10)
        return sum(samples) / len(samples) if samples else None
    return finish


def grid(tmp: Path, clips: list[str], models, args, dtypes) -> None:
    cuda = args.device.startswith("cuda")
    rows = rows_for(clips, PROMPTS[:1])
    records = []
    for name, model, trust in models:
        for dtype in dtypes:
            for batch in args.batch_sizes:
                base = None
                for workers in args.workers:
                    scorer = scorer_for(model, trust, args.device, dtype, batch, workers)
                    warm(scorer, rows, tmp, tmp)
                    finish = gpu_utilisation(args.device) if cuda else None
                    seconds, _ = timed_run(scorer, rows, tmp, tmp / f"g-{time.monotonic_ns()}")
                    util = finish() if finish else None
                    split = scorer.seconds
                    if cuda:  # the split, from a run that waits for the GPU after each phase
                        scorer.profile = True
                        timed_run(scorer, rows, tmp, tmp / f"p-{time.monotonic_ns()}")
                        split = scorer.seconds
                    rate = len(clips) / seconds
                    base = base or rate
                    records.append({"model": name, "dtype": dtype, "batch": batch, "workers": workers,
                                    "clips/s": f"{rate:.1f}", "÷ 0 workers": f"{rate / base:.2f}",
                                    **{f"{k} s": f"{split[k]:.2f}" for k in PHASES},
                                    "GPU %": "n/a" if util is None else f"{util:.0f}"})
    print(f"\n## Grid: {len(clips)} clips end to end (seconds of each phase; decode summed over workers)\n")
    print(table(records, ["model", "dtype", "batch", "workers", "clips/s", "÷ 0 workers", *(f"{k} s" for k in PHASES),
                          "GPU %"]))


def numerics(tmp: Path, clips: list[str], demo: list[str], models, args, dtypes) -> None:
    """Each dtype x attention against float32 + eager: largest |Δcos| and ranking changes."""
    import numpy as np

    from emolia_bench.errors import InputError

    records = []
    for name, model, trust in models:
        for label, subset in (("demo", demo), ("synthetic", clips)):
            rows = rows_for(subset, PROMPTS)
            sims = {}
            for dtype in dtypes:
                for attention in ("eager", "sdpa"):
                    scorer = scorer_for(model, trust, args.device, dtype, 32, 2, attention)
                    try:
                        _, result = timed_run(scorer, rows, tmp, tmp / f"n-{time.monotonic_ns()}")
                    except InputError as e:
                        print(f"{name}, {dtype}, {attention}: {e.message}")
                        continue
                    sims[(dtype, attention)] = np.asarray(result.similarity).reshape(len(subset), len(PROMPTS))
            ref = sims.get(("float32", "eager"))
            for (dtype, attention), s in sims.items():
                if ref is None or (dtype, attention) == ("float32", "eager"):
                    continue
                changed, swapped = ranking_changes(ref, s)
                records.append({"model": name, "clips": f"{label} ({len(subset)})", "dtype": dtype, "attention": attention,
                                "max |Δcos|": f"{np.nanmax(np.abs(s - ref)):.2e}",
                                "prompts whose ranking changes": f"{changed} of {len(PROMPTS)}",
                                "pairs swapped": f"{swapped} of {len(PROMPTS) * len(subset) * (len(subset) - 1) // 2}"})
    print("\n## Numerics against float32 with eager attention\n")
    print(table(records, ["model", "clips", "dtype", "attention", "max |Δcos|", "prompts whose ranking changes",
                          "pairs swapped"]))


def ranking_changes(ref, other) -> tuple[int, int]:
    """Prompts (columns) whose ordering of the clips (rows) differs, and the clip pairs whose order
    flips, summed over prompts (ties in either count as no order)."""
    import numpy as np

    changed = swapped = 0
    for j in range(ref.shape[1]):
        a, b = ref[:, j], other[:, j]
        da, db = np.sign(a[:, None] - a[None, :]), np.sign(b[:, None] - b[None, :])
        flips = int(np.triu(da * db < 0, 1).sum())
        swapped += flips
        changed += flips > 0
    return changed, swapped


if __name__ == "__main__":
    main()
