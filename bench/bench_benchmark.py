"""Time benchmark.py against the import floor F, and the endpoint client against a sequential
client, against two kinds of server, in one run.

    uv run bench/bench_benchmark.py
    uv run bench/bench_benchmark.py --latency-ms 20 --rows 3000

Prints the machine's speed line and F (the wall time of ``import pandas, matplotlib.figure,
matplotlib.backends.backend_agg``), then:

* sham mode on both 1× synthetic subsets (24 k emo + 33 k dim rows: 37.6 k labelled items),
  default (with its 8 figures) and ``--no-figures``, whole processes, best of 3, each as a
  multiple of F, with the seconds per phase (``--timings``); and sham mode on the real exports
  in ../shared/real when present. Target: the default ≤ 2.0 F.
* the endpoint at ``--latency-ms`` model latency, clips of ~40 kB: a plain sequential client
  (one ``http.client`` connection, one request at a time, the same payloads) measured in the
  same run is the reference; ours is ``benchmark.py --endpoint … --fresh`` with the default
  settings (its scoring phase as it reports it). Against sham_clap_server.py (which sets
  TCP_NODELAY) and against a plain keep-alive ``http.server`` that writes its headers and its
  body in two writes without TCP_NODELAY (the delayed-ACK trap). Target: ≥ 20× sequential.
* the client's CPU per request: EndpointScorer scoring 3,000 requests against a zero-latency
  sham server in another process, this process's CPU time ÷ requests (without audio, and with
  40 kB clips). Target: ≤ 0.5 ms.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _measure import against_floor, compile_package, import_floor, machine_speed, table, timings  # noqa: E402
from synth import write_exports, write_placeholder_clips  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class Server:
    """sham_clap_server.py in its own process (TCP_NODELAY, one write per response)."""

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


PLAIN_SERVER = r"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
latency = float(sys.argv[1]) / 1000

class Plain(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; http.server leaves Nagle on and writes headers, then body
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(latency)
        data = json.dumps({"similarity": (len(body) % 997) / 997}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()  # flushes the headers: one write
        self.wfile.write(data)  # the body: a second write

server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
server.daemon_threads = True
print(f"http://127.0.0.1:{server.server_address[1]}/v1/similarity", flush=True)
server.serve_forever()
"""


class PlainServer(Server):
    """A plain keep-alive http.server in its own process: headers and body in two writes, Nagle on."""

    def __init__(self, latency_ms: float):
        self.proc = subprocess.Popen([sys.executable, "-c", PLAIN_SERVER, str(latency_ms)], stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().split()[-1]


def sequential_rate(url: str, payloads: list[bytes]) -> float:
    """Requests per second of a one-at-a-time client (one http.client connection, no tricks)."""
    import http.client
    from urllib.parse import urlparse

    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    t = time.perf_counter()
    for body in payloads:
        conn.request("POST", u.path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
    conn.close()
    return len(payloads) / (time.perf_counter() - t)


def client_cpu_per_request(url: str, dataset: Path, clip_kb: int, n: int = 3000) -> float:
    """Milliseconds of this process's CPU per request of our endpoint client (EndpointScorer:
    reading and hashing the clip, the payload, aiohttp, the cache), ``n`` distinct prompts of one
    clip against a zero-latency server in another process."""
    from emolia_bench.scorers.endpoint import EndpointScorer

    rows = pd.DataFrame({"audio_path": "c.wav", "prompt": [f"calm {i}" for i in range(n)], "item_stem": "c"})
    scorer = EndpointScorer([url], cache_dir=dataset / "cpu-cache", fresh=True, send_audio=clip_kb > 0)
    scorer.score(rows.head(100), dataset)  # warm: imports, connections
    t = time.process_time()
    result = scorer.score(rows, dataset)
    cpu = (time.process_time() - t) / n * 1000
    assert all(e is None for e in result.error), result.error[:3]
    return cpu


def sham_on_real_exports(tmp: Path):
    """Sham mode on the real exports in ../shared/real (placeholder clips, the real dim rubric):
    ((best-of-3 run, F beside it), rows scored), or None where the exports are absent."""
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
    return against_floor(cmd, 3), n_rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=float, default=20)
    p.add_argument("--rows", type=int, default=3000, help="dim rows scored through the endpoint")
    p.add_argument("--clip-kb", type=int, default=40)
    args = p.parse_args()
    compile_package()
    print(machine_speed())
    floor = import_floor()
    print(f"F (import floor) = {floor:.3f} s at the start (best of 5)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_exports(tmp, 1)
        subprocess.run([sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(tmp / "annotations"),
                        "--output-root", str(tmp / "an")], check=True, stdout=subprocess.DEVNULL)
        # sham: empty placeholder clips for every item (it only checks that they exist)
        write_placeholder_clips(tmp / "empty", tmp / "an")
        sham_cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp / "an"),
                    "--dataset-root", str(tmp / "empty"), "--output-dir", str(tmp / "sham")]
        default, f_default = against_floor(sham_cmd, 3)
        sham, f_sham = against_floor(sham_cmd + ["--no-figures"], 3)
        phase = timings(sham_cmd)
        real = sham_on_real_exports(tmp / "real")
        n_rows = sum(len(open(tmp / "an" / s / "benchmark_labels.csv").readlines()) - 1 for s in ("emolia-emo", "emolia-dim"))
        rows = [{"run": "sham, both 1x subsets, default (8 figures)", "rows": n_rows, "wall s": f"{default['wall']:.2f}",
                 "F beside": f"{f_default:.3f}", "= F": f"{default['wall'] / f_default:.2f}",
                 "peak MB": f"{default['peak_mb']:.0f}", "reference / target": "target <= 2.0 F"},
                {"run": "sham, both 1x subsets, --no-figures", "rows": n_rows, "wall s": f"{sham['wall']:.2f}",
                 "F beside": f"{f_sham:.3f}", "= F": f"{sham['wall'] / f_sham:.2f}", "peak MB": f"{sham['peak_mb']:.0f}"}]
        if real is not None:
            (run, f_real), n_real = real
            rows.append({"run": "sham, both real exports, --no-figures", "rows": n_real, "wall s": f"{run['wall']:.2f}",
                         "F beside": f"{f_real:.3f}", "= F": f"{run['wall'] / f_real:.2f}", "peak MB": f"{run['peak_mb']:.0f}"})
        print("\nbenchmark.py, sham mode, best of 3 (each run divided by the best F taken right before its runs)")
        print(table(rows, ["run", "rows", "wall s", "F beside", "= F", "peak MB", "reference / target"]))
        print("seconds per phase of the default run (--timings): " + ", ".join(f"{k} {v:.3f}" for k, v in phase.items()))

        # endpoint: real-sized random clips for the dim rows that are sent
        dataset = tmp / "dataset"
        rng = np.random.default_rng(0)
        dim = pd.read_csv(tmp / "an/emolia-dim/benchmark_labels.csv", dtype=str, keep_default_na=False).head(args.rows)
        payloads = []
        for r in dim.itertuples():
            rel = f"emolia-dim/data/{r.dimension}/{r.level}/{r.polarity}/{r.file_name}"
            clip = dataset / rel
            clip.parent.mkdir(parents=True, exist_ok=True)
            clip.write_bytes(rng.bytes(args.clip_kb * 1024))
            if len(payloads) < 200:
                payloads.append(json.dumps({"text": "x", "audio_filename": r.file_name, "audio_path": rel,
                                            "item_stem": f"{r.file_name[:-4]}__{r.dimension}_{r.level}_{r.polarity}",
                                            "audio_base64": base64.b64encode(clip.read_bytes()).decode()}).encode())

        def ours(url: str, tag: str) -> tuple[float, str]:
            cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp / "an"), "--dataset-root",
                   str(dataset), "--no-figures", "--subset", "emolia-dim", "--limit", str(args.rows), "--endpoint", url,
                   "--fresh", "--cache-dir", str(tmp / f"cache-{tag}"), "--output-dir", str(tmp / f"out-{tag}")]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            return float(re.search(r"\(([\d,.]+) rows/s\)", out).group(1).replace(",", ""))

        rows = []
        for name, make in (("sham_clap_server.py (TCP_NODELAY)", lambda: Server(dataset, args.latency_ms)),
                           ("plain http.server (2 writes, Nagle on)", lambda: PlainServer(args.latency_ms))):
            with make() as url:
                seq = max(sequential_rate(url, payloads) for _ in range(2))
                rate = max(ours(url, f"{len(rows)}-{k}") for k in range(2))
            rows += [{"server": name, "client": "sequential, one request at a time", "rows/s": f"{seq:,.0f}",
                      "ratio": "1.0x (reference)"},
                     {"server": name, "client": "benchmark.py, default settings", "rows/s": f"{rate:,.0f}",
                      "ratio": f"{rate / seq:.1f}x (target >= 20x)"}]
        print(f"\nendpoint at {args.latency_ms:g} ms model latency, {args.clip_kb} kB clips, {args.rows:,} dim rows "
              "(ours: the scoring phase as benchmark.py reports it; best of 2)")
        print(table(rows, ["server", "client", "rows/s", "ratio"]))
        (dataset / "c.wav").write_bytes(rng.bytes(args.clip_kb * 1024))  # the clip the CPU loop names
        with Server(dataset, 0) as url:
            cpu = {kb: client_cpu_per_request(url, dataset, kb) for kb in (0, args.clip_kb)}
        print(f"\nclient CPU per request (EndpointScorer, zero-latency sham server; target <= 0.5 ms): "
              f"{cpu[0]:.3f} ms with a small body, {cpu[args.clip_kb]:.3f} ms with a {args.clip_kb} kB clip")


if __name__ == "__main__":
    main()
