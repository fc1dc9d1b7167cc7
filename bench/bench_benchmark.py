"""Time benchmark.py: sham mode on both real-sized subsets, and the endpoint path against
sham_clap_server.py with simulated model latency, side by side with a sequential client.

    uv run bench/bench_benchmark.py
    uv run bench/bench_benchmark.py --latency-ms 20 --workers 64 --rows 3000

Sham: analysis of 1× synthetic exports (24 k emo + 34 k dim rows: 37.6 k labelled items, twice
the real dim subset's 11.3 k), then `benchmark.py` on both subsets, wall time of the whole
process; and the same on the real exports in ../shared/real when present (7,988 + 11,257 items,
placeholder clips, the real rubric) — the real-sized subsets the ≤ 1.5 s target is about.

Endpoint: clips of ~40 kB random bytes; the server sleeps --latency-ms per request. The
reference is a plain sequential client (one requests.Session, one request at a time, same
payloads) measured in the same run; ours is `benchmark.py --endpoint … --fresh --workers N`
(its scoring phase, as benchmark.py reports it; whole-process wall time, start-up included, is
shown too). Targets: ≥ 20× the sequential throughput, and ≥ 80 % of min(workers ÷ latency, what
one client process can send), the latter measured against a zero-latency server.
"""

import argparse
import base64
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _measure import compile_package, measure, table  # noqa: E402
from synth import write_exports, write_placeholder_clips  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


class Server:
    def __init__(self, dataset_root: Path, latency_ms: float):
        self.proc = subprocess.Popen([sys.executable, str(REPO / "sham_clap_server.py"), "--port", "0",
                                      "--latency-ms", str(latency_ms), "--dataset-root", str(dataset_root)],
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().split()[-1]

    def __enter__(self):
        return self.url

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)


def sequential_rate(url: str, dataset: Path, labels: Path, n: int) -> float:
    """Requests per second of a one-at-a-time client sending the same payloads."""
    dim = pd.read_csv(labels / "emolia-dim/benchmark_labels.csv", dtype=str, keep_default_na=False).head(n)
    payloads = []
    for r in dim.itertuples():
        rel = f"emolia-dim/data/{r.dimension}/{r.level}/{r.polarity}/{r.file_name}"
        payloads.append({"text": "x", "audio_filename": r.file_name, "audio_path": rel,
                         "item_stem": f"{r.file_name[:-4]}__{r.dimension}_{r.level}_{r.polarity}",
                         "audio_base64": base64.b64encode((dataset / rel).read_bytes()).decode()})
    with requests.Session() as s:
        t = time.perf_counter()
        for p in payloads:
            s.post(url, json=p, timeout=30).raise_for_status()
        return len(payloads) / (time.perf_counter() - t)


def sham_on_real_exports(tmp: Path):
    """Sham mode on the real exports in ../shared/real (placeholder clips, the real dim rubric):
    (best-of-3 measurement, rows scored), or None where the exports are absent."""
    real = REPO.parent / "shared" / "real"
    if not real.is_dir():
        return None
    ann = tmp / "annotations"
    ann.mkdir(parents=True)
    for sub in ("emolia-emo", "emolia-dim"):
        shutil.copytree(real / sub / "annotations" / sub, ann / sub)
    subprocess.run([sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(ann), "--output-root",
                    str(tmp / "an"), "--no-figures"], check=True, stdout=subprocess.DEVNULL)
    write_placeholder_clips(tmp / "dataset", tmp / "an")
    shutil.copy(real / "emolia-dim/dataset/emolia-dim/variables.json", tmp / "dataset/emolia-dim/variables.json")
    cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp / "an"), "--dataset-root",
           str(tmp / "dataset"), "--output-dir", str(tmp / "sham"), "--no-figures"]
    n_rows = sum(len(open(tmp / "an" / s / "benchmark_labels.csv").readlines()) - 1 for s in ("emolia-emo", "emolia-dim"))
    return min((measure(cmd) for _ in range(3)), key=lambda r: r["wall"]), n_rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=float, default=20)
    p.add_argument("--workers", type=int, default=64)
    p.add_argument("--rows", type=int, default=3000, help="dim rows scored through the endpoint")
    p.add_argument("--clip-kb", type=int, default=40)
    args = p.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_exports(tmp, 1)
        subprocess.run([sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(tmp / "annotations"),
                        "--output-root", str(tmp / "an")], check=True, stdout=subprocess.DEVNULL)
        # sham: empty placeholder clips for every item (it only checks that they exist)
        write_placeholder_clips(tmp / "empty", tmp / "an")
        sham_cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp / "an"),
                    "--dataset-root", str(tmp / "empty"), "--output-dir", str(tmp / "sham")]
        sham = min((measure(sham_cmd + ["--no-figures"]) for _ in range(3)), key=lambda r: r["wall"])
        sham_fig = min(measure(sham_cmd)["wall"] for _ in range(2))
        real = sham_on_real_exports(tmp / "real")
        # endpoint: real-sized random clips for the dim rows that are sent
        dataset = tmp / "dataset"
        rng = np.random.default_rng(0)
        dim = pd.read_csv(tmp / "an/emolia-dim/benchmark_labels.csv", dtype=str, keep_default_na=False).head(args.rows)
        for r in dim.itertuples():
            clip = dataset / "emolia-dim/data" / r.dimension / r.level / r.polarity / r.file_name
            clip.parent.mkdir(parents=True, exist_ok=True)
            clip.write_bytes(rng.bytes(args.clip_kb * 1024))
        n_clips = len(dim)
        base = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp / "an"),
                "--dataset-root", str(dataset)]
        n_rows = sum(len(open(tmp / "an" / s / "benchmark_labels.csv").readlines()) - 1 for s in ("emolia-emo", "emolia-dim"))
        rows = [{"run": "sham, both 1x subsets, --no-figures", "rows": n_rows, "wall s": f"{sham['wall']:.2f}",
                 "peak MB": f"{sham['peak_mb']:.0f}", "rows/s": f"{n_rows / sham['wall']:,.0f}", "ratio": "target <= 1.5 s"},
                {"run": "sham, both 1x subsets, with figures", "rows": n_rows, "wall s": f"{sham_fig:.2f}",
                 "ratio": "+ matplotlib import and 8 PNGs"}]
        if real is not None:
            rows.append({"run": "sham, both real exports, --no-figures", "rows": real[1], "wall s": f"{real[0]['wall']:.2f}",
                         "peak MB": f"{real[0]['peak_mb']:.0f}", "rows/s": f"{real[1] / real[0]['wall']:,.0f}",
                         "ratio": "target <= 1.5 s (the real-sized subsets)"})

        def endpoint_run(url, tag, repeat=2):
            """Best of ``repeat`` runs: the scoring-phase rate benchmark.py prints."""
            runs = [endpoint_once(url, f"{tag}{i}") for i in range(repeat)]
            return max(runs, key=lambda r: r[1])

        def endpoint_once(url, tag):
            cmd = base + ["--no-figures", "--subset", "emolia-dim", "--limit", str(args.rows), "--endpoint", url, "--fresh",
                          "--workers", str(args.workers), "--cache-dir", str(tmp / f"cache-{tag}"),
                          "--output-dir", str(tmp / f"out-{tag}")]
            t = time.perf_counter()
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            wall = time.perf_counter() - t
            rate = float(re.search(r"\(([\d,.]+) rows/s\)", out).group(1).replace(",", ""))
            return {"wall": wall, "peak_mb": float("nan")}, rate

        with Server(dataset, 0) as url:
            ceiling_run, client_ceiling = endpoint_run(url, "zero")
        with Server(dataset, args.latency_ms) as url:
            seq = max(sequential_rate(url, dataset, tmp / "an", min(200, args.rows)) for _ in range(2))
            ours_run, ours = endpoint_run(url, "lat")
        bound = min(args.workers / (args.latency_ms / 1000), client_ceiling)
        rows += [
            {"run": f"sequential client, {args.latency_ms:g} ms latency", "rows": min(200, args.rows), "rows/s": f"{seq:,.0f}",
             "ratio": "1.0x (reference)"},
            {"run": f"benchmark.py --workers {args.workers}, 0 ms latency", "rows": args.rows,
             "wall s": f"{ceiling_run['wall']:.2f}", "rows/s": f"{client_ceiling:,.0f}",
             "ratio": "one client process's ceiling"},
            {"run": f"benchmark.py --workers {args.workers}, {args.latency_ms:g} ms latency", "rows": args.rows,
             "wall s": f"{ours_run['wall']:.2f}", "rows/s": f"{ours:,.0f}",
             "ratio": f"{ours / seq:.1f}x sequential; {ours / bound:.0%} of min(workers/latency, ceiling) = {bound:,.0f}/s"},
        ]
        print(f"benchmark.py; endpoint rows on {n_clips:,} clips of {args.clip_kb} kB; rows/s of the endpoint runs = "
              f"scoring phase (python {sys.version.split()[0]})")
        print(table(rows, ["run", "rows", "wall s", "peak MB", "rows/s", "ratio"]))
        print(json.dumps({"sham_wall_s": round(sham["wall"], 3), "sequential_rps": round(seq, 1),
                          "ours_rps": round(ours, 1), "speedup": round(ours / seq, 1),
                          "client_ceiling_rps": round(client_ceiling, 1)}))


if __name__ == "__main__":
    main()
