"""Throughput of the two real-model paths on CPU: in-process (`benchmark.py --clap-model`) and
through `clap_server.py` (`benchmark.py --endpoint`), on the committed demo with a tiny
randomly initialised CLAP and a tiny remote-code (VoiceCLAP-shaped) model, both built here
(no download).

    uv run bench/bench_clap.py
    uv run bench/bench_clap.py --audio-batch-size 16 --server-batch 16 --workers 16

Clips per second = distinct clips embedded ÷ the scoring phase's seconds: in-process from the
scorer's own counters (every clip and prompt embedded once, fresh embedding cache), through the
server as rows ÷ the client's scoring seconds (the server embeds each request's clip, batching
concurrent requests). The tiny model makes this a measure of our plumbing (decode, resample,
feature extraction, batching, HTTP), not of a real CLAP's compute. Needs the `clap` extra and
PyTorch.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import table  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--audio-batch-size", type=int, default=8, help="in-process clips per forward pass (default: 8)")
    p.add_argument("--server-batch", type=int, default=8, help="clap_server.py --max-batch (default: 8)")
    p.add_argument("--workers", type=int, default=8, help="benchmark.py --workers against the server (default: 8)")
    args = p.parse_args()

    import pandas as pd

    from emolia_bench.analysis import analyze_subset
    from emolia_bench.io import load_annotations, load_flags, load_users
    from emolia_bench.selection import Filters, apply_filters, build_rows
    from emolia_bench.subsets import SUBSETS
    from emolia_bench.tiny_clap import build_tiny_clap, build_tiny_voiceclap

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        frames = []
        for subset in SUBSETS.values():
            folder = REPO / "annotations" / subset.name
            a = analyze_subset(subset, load_annotations(folder / "annotations.csv", subset), load_users(folder / "users.csv"),
                               load_flags(folder / "flags.csv", subset) if subset.has_flags else None)
            kept, _ = apply_filters(a.labels, Filters())
            frames.append(build_rows(kept, subset, REPO / "dataset")[["audio_path", "prompt", "item_stem"]])
        rows = pd.concat(frames, ignore_index=True).dropna().reset_index(drop=True)
        n_clips = rows["audio_path"].nunique()
        results, notes = [], []
        for name, model, trust in (("tiny CLAP", build_tiny_clap(tmp / "clap"), False),
                                   ("tiny remote-code", build_tiny_voiceclap(tmp / "rc"), True)):
            results.append(in_process(name, model, trust, rows, tmp / name, args.audio_batch_size))
            row, batches = served(name, model, trust, rows, tmp / name, args.server_batch, args.workers)
            results.append(row)
            notes.append(f"{name} server: {len(rows)} requests in {batches} forward passes "
                         f"(mean batch {len(rows) / max(batches, 1):.1f})")
    print(f"demo: {len(rows)} rows over {n_clips} distinct clips; tiny models on CPU")
    print("\n".join(notes))
    print(table(results, ["model", "path", "batch", "rows", "clips", "seconds", "clips/s", "rows/s"]))


def in_process(name: str, model: Path, trust: bool, rows, tmp: Path, batch: int) -> dict:
    """Warm the model once (load time is not throughput), then score every row with a fresh cache."""
    from emolia_bench.scorers.clap import ClapScorer

    scorer = ClapScorer(str(model), device="cpu", audio_batch_size=batch, cache_dir=tmp / "warm", trust_remote_code=trust)
    scorer.score(rows.head(2), REPO / "dataset")
    scorer.cache_dir, scorer.stats = tmp / "cold", {"texts_embedded": 0, "clips_embedded": 0, "cache_hits": 0}
    t = time.perf_counter()
    scorer.score(rows, REPO / "dataset")
    seconds = time.perf_counter() - t
    return {"model": name, "path": "in-process", "batch": batch, "rows": len(rows), "clips": scorer.stats["clips_embedded"],
            "seconds": f"{seconds:.2f}", "clips/s": f"{scorer.stats['clips_embedded'] / seconds:.1f}",
            "rows/s": f"{len(rows) / seconds:.1f}"}


def served(name: str, model: Path, trust: bool, rows, tmp: Path, server_batch: int, workers: int) -> tuple[dict, int]:
    """Through clap_server.py: every row is one request carrying its clip."""
    import requests

    from emolia_bench.scorers.endpoint import EndpointScorer

    server = subprocess.Popen([sys.executable, str(REPO / "clap_server.py"), "--model", str(model), "--port", "0",
                               "--device", "cpu", "--max-batch", str(server_batch),
                               *(["--trust-remote-code"] if trust else [])], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[-1]
        EndpointScorer([url], workers=workers, cache_dir=tmp / "http", fresh=True).score(rows.head(workers), REPO / "dataset")
        client = EndpointScorer([url], workers=workers, cache_dir=tmp / "http2", fresh=True)
        health = url.rsplit("/v1/", 1)[0] + "/health"
        before = requests.get(health, timeout=10).json()["batches"]
        t = time.perf_counter()
        client.score(rows, REPO / "dataset")
        seconds = time.perf_counter() - t
        batches = requests.get(health, timeout=10).json()["batches"] - before
    finally:
        server.terminate()
        server.wait(20)
    return ({"model": name, "path": f"clap_server.py ({workers} workers)", "batch": server_batch, "rows": len(rows),
             "clips": len(rows), "seconds": f"{seconds:.2f}", "clips/s": f"{len(rows) / seconds:.1f}",
             "rows/s": f"{len(rows) / seconds:.1f}"}, batches)


if __name__ == "__main__":
    main()
