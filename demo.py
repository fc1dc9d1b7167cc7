"""Run the whole pipeline on the committed demo data, stage by stage, as a user would.

    uv run demo.py                      # outputs in demo_outputs/
    uv run demo.py --workdir /tmp/x     # anywhere else

Each stage is the real top-level script, run as a subprocess with its command printed:
anonymize (on a copy of examples/annotations_raw, so the committed map is never touched)
-> analysis -> benchmark with the sham scorer -> benchmark through a local sham server.
Stops at the first stage that fails, with that stage's exit code.
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent


def stage(*args) -> None:
    cmd = [sys.executable, *map(str, args)]
    print("$", " ".join(["python", *map(str, args)]), flush=True)
    code = subprocess.call(cmd, cwd=REPO)
    if code != 0:
        print(f"stage failed with exit code {code}", file=sys.stderr)
        sys.exit(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=REPO / "demo_outputs",
                        help="where every stage writes (default: demo_outputs/)")
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)

    raw = work / "annotations_raw"
    shutil.rmtree(raw, ignore_errors=True)
    shutil.copytree(REPO / "examples" / "annotations_raw", raw)
    stage("anonymize.py", "--raw-root", raw, "--out-root", work / "annotations")
    stage("analysis.py", "--annotations-root", work / "annotations", "--output-root", work / "analysis_outputs")
    print(f"\ndone: reports in {work}/analysis_outputs/report.md")


if __name__ == "__main__":
    main()
