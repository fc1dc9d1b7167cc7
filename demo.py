"""Run the whole pipeline on the committed demo data, stage by stage, as a user would.

    uv run demo.py                      # outputs in demo_outputs/
    uv run demo.py --workdir /tmp/x     # anywhere else

Each stage is the real top-level script, run as a subprocess with its command printed:
anonymize (on a copy of examples/annotations_raw, so the committed map is never touched)
-> analysis -> benchmark with the sham scorer -> benchmark through a local sham server
(started on a free loopback port and stopped afterwards), whose scores must equal the sham
scores on every row -> a second sham run at threshold 0.2 -> compare.py of the two sham runs
-> with the 'clap' extra and PyTorch, a tiny CLAP and a tiny remote-code (VoiceCLAP-shaped,
--similarity logit) model, each scored in-process and through clap_server.py (same scores).
Stops at the first stage that fails, with that stage's exit code.
"""

import argparse
import csv
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent


def stage(*args) -> None:
    cmd = [sys.executable, *map(str, args)]
    print("$", " ".join(["python", *map(str, args)]), flush=True)
    code = subprocess.call(cmd, cwd=REPO)
    if code != 0:
        print(f"stage failed with exit code {code}", file=sys.stderr)
        sys.exit(code)


@contextmanager
def server(script: str, *args):
    """Start a server script on a free loopback port; stop it on exit."""
    cmd = [sys.executable, str(REPO / script), "--port", "0", *map(str, args)]
    print("$", " ".join(["python", *cmd[1:]]), "&", flush=True)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if "http://" not in line:
            sys.exit(f"{script} did not start (exit code {proc.poll()})")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(20)


def similarities(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return [row["similarity"] for row in csv.DictReader(f)]


def check_same_scores(local: Path, remote: Path, what: str, tolerance: float = 0.0) -> None:
    """Every row of both subsets scored the same by two runs (the sham paths exactly, to the
    written digit; a model within ``tolerance``), or stop."""
    for subset in ("emolia-emo", "emolia-dim"):
        a = similarities(local / subset / "predictions.csv")
        b = similarities(remote / subset / "predictions.csv")
        if tolerance == 0.0:
            same, detail = a == b, ""
        else:
            worst = max((abs(float(x) - float(y)) for x, y in zip(a, b, strict=False)), default=0.0)
            same, detail = len(a) == len(b) and worst <= tolerance, f" (max |diff| {worst:.1e})"
        if not same:
            sys.exit(f"{subset}: {what} differ{detail}")
        print(f"{subset}: all {len(a)} {what} agree{detail}")


def clap_stages(work: Path) -> None:
    """A tiny CLAP and a tiny remote-code (VoiceCLAP-shaped) model, each scored in-process and
    through clap_server.py: the two must agree on every row."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("(skipping the CLAP stages: install the 'clap' extra and PyTorch to run them)")
        return
    models = work / "tiny_models"
    stage("-m", "emolia_bench.tiny_clap", models / "clap", "--remote-code", models / "remote_code")
    common = ["--analysis-root", work / "analysis_outputs", "--dataset-root", REPO / "dataset", "--no-figures"]
    # (name, checkpoint, options of both the in-process run and the server)
    runs = [("clap", models / "clap", []),
            ("remote_code", models / "remote_code", ["--trust-remote-code", "--similarity", "logit"])]
    for name, model, both in runs:
        stage("benchmark.py", *common, "--output-dir", work / f"benchmark_{name}", "--clap-model", model,
              "--clap-device", "cpu", "--cache-dir", work / "cache", "--fresh", *both)
        with server("clap_server.py", "--model", model, "--device", "cpu", "--dataset-root", REPO / "dataset",
                    *both) as url:
            stage("benchmark.py", *common, "--output-dir", work / f"benchmark_{name}_server", "--endpoint", url,
                  "--no-audio-send", "--cache-dir", work / "cache", "--fresh", "--workers", "8")
        check_same_scores(work / f"benchmark_{name}", work / f"benchmark_{name}_server",
                          f"tiny {name.replace('_', '-')} scores in-process and through clap_server.py", tolerance=1e-4)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=REPO / "demo_outputs",
                        help="where every stage writes (default: demo_outputs/)")
    args = parser.parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)

    raw = work / "annotations_raw"
    shutil.rmtree(raw, ignore_errors=True)
    shutil.copytree(REPO / "examples" / "annotations_raw", raw)
    stage("anonymize.py", "--raw-root", raw, "--out-root", work / "annotations")
    stage("analysis.py", "--annotations-root", work / "annotations", "--output-root", work / "analysis_outputs",
          "--dataset-root", REPO / "dataset")  # clip durations for the rater profiles
    stage("benchmark.py", "--analysis-root", work / "analysis_outputs", "--dataset-root", REPO / "dataset",
          "--output-dir", work / "benchmark_sham")
    with server("sham_clap_server.py", "--dataset-root", REPO / "dataset") as url:
        stage("benchmark.py", "--analysis-root", work / "analysis_outputs", "--dataset-root", REPO / "dataset",
              "--output-dir", work / "benchmark_server", "--endpoint", url, "--cache-dir", work / "cache", "--fresh")
    check_same_scores(work / "benchmark_sham", work / "benchmark_server", "local sham scores and scores through the server")
    # a second sham variant, and the comparison of the two
    stage("benchmark.py", "--analysis-root", work / "analysis_outputs", "--dataset-root", REPO / "dataset",
          "--output-dir", work / "benchmark_sham_t0.2", "--threshold", "0.2")
    stage("compare.py", work / "benchmark_sham", work / "benchmark_sham_t0.2", "--names", "sham-t0.0", "sham-t0.2",
          "--output-dir", work / "comparison")
    clap_stages(work)
    print(f"\ndone: reports in {work}/analysis_outputs/report.md, {work}/benchmark_sham/<subset>/report.md "
          f"and {work}/comparison/leaderboard.md")


if __name__ == "__main__":
    main()
