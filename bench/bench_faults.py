"""How an endpoint run fares under faults, and how fast it gives up on a dead server.

    uv run bench/bench_faults.py [--rates 0.2 0.5] [--scale 1.0]

Writes bench/synth.py's exports at --scale (1 = the real emo subset's size, ~8,000 items),
analyses them, and scores the emo subset through a local server (127.0.0.1, a free port) that
answers each attempt wrongly with probability RATE, cycling through five kinds of fault: HTTP
500, 429 with Retry-After: 1, a non-JSON body, a dropped connection, and a stall past the
client's --timeout 1. Prints, per rate, the rows scored in one run, the requests per row and
the wall time; then the time a run takes to give up on a port where nothing listens
(--give-up-after 10). Everything stays on this machine and stops by itself.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from synth import write_exports, write_placeholder_clips  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.servers import scripted_server  # noqa: E402

KINDS = ("500", "429", "nonjson", "drop", "stall")  # as tests/servers.py serves them


def fault_at(rate: float):
    """The server's fault for each attempt: with probability ``rate`` (a hash of the request and
    the attempt number, so runs are repeatable) one of :data:`KINDS`, in turn."""

    def fault(payload, attempt):
        key = f"{payload['item_stem']}|{payload['text']}|{attempt}"
        h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
        return KINDS[int(h / rate * len(KINDS)) % len(KINDS)] if h < rate else None

    return fault


def bench_run(tmp: Path, url: str, out: str, *extra) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp / "an"), "--dataset-root",
           str(tmp / "clips"), "--subset", "emolia-emo", "--output-dir", str(tmp / out), "--endpoint", url,
           "--cache-dir", str(tmp / out / "cache"), "--no-figures", "--no-audio-send", *extra]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    return time.perf_counter() - start, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.2, 0.5])
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        write_exports(tmp / "ex", args.scale)
        subprocess.run([sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(tmp / "ex/annotations"),
                        "--output-root", str(tmp / "an"), "--no-figures", "--subsets", "emolia-emo"], check=True,
                       capture_output=True)
        (tmp / "an/emolia-dim").mkdir(exist_ok=True)  # synth's helper lists both subsets' clips
        import pandas as pd

        pd.DataFrame(columns=["file_name", "dimension", "level", "polarity"]).to_csv(
            tmp / "an/emolia-dim/benchmark_labels.csv", index=False)
        write_placeholder_clips(tmp / "clips", tmp / "an")
        rows = len(pd.read_csv(tmp / "an/emolia-emo/benchmark_labels.csv"))
        print(f"emo subset of bench/synth.py at scale {args.scale}: {rows:,} rows; --timeout 1, default retries "
              "(--max-retries 16, --give-up-after 120), default --workers")
        print(f"{'fault rate':>10}  {'rows scored':>14}  {'requests/row':>12}  {'wall s':>7}  exit")
        for rate in args.rates:
            # the tests' scripted endpoint: stalls last 2 s, past the client's 1 s deadline
            with scripted_server(fault_at(rate), stall=2.0) as (server, url):
                wall, r = bench_run(tmp, url, f"run_{rate}", "--timeout", "1")
                server.requests = len(server.payloads)
            pred = pd.read_csv(tmp / f"run_{rate}/emolia-emo/predictions.csv", keep_default_na=False)
            ok = int((pred["ok"].astype(str) == "True").sum())
            print(f"{rate:>10.0%}  {ok:>6,} of {rows:<6,}  {server.requests / rows:>12.2f}  {wall:>7.1f}  {r.returncode}")
            for error, n in pred.loc[pred["error"] != "", "error"].value_counts().items():
                print(f"{'':>10}  {n} row(s): {error}")
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        wall, r = bench_run(tmp, f"http://127.0.0.1:{port}/v1/similarity", "dead", "--give-up-after", "10", "--limit", "200")
        print(f"dead endpoint (nothing listens), --give-up-after 10: run ended after {wall:.1f} s, exit {r.returncode}")


if __name__ == "__main__":
    main()
