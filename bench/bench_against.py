"""This checkout's stages against another checkout's, side by side in one run.

    git worktree add /tmp/ref c1206c5
    uv run bench/bench_against.py --reference /tmp/ref

Writes bench/synth.py's 1x exports, then runs, alternately (this, reference, this, …) and
``--repeat`` times each, analysis.py with its defaults and benchmark.py in sham mode with its
defaults (figures included) on placeholder clips, with this checkout's Python environment.
Prints each one's best wall time and the ratio this / reference: alternating runs share the
machine's drift, so the ratio holds where the seconds do not.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from synth import write_exports, write_placeholder_clips  # noqa: E402


def wall(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference", type=Path, required=True, help="another checkout of this repository")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        write_exports(tmp, 1)
        subprocess.run([sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(tmp / "annotations"),
                        "--output-root", str(tmp / "labels"), "--no-figures"], check=True, stdout=subprocess.DEVNULL)
        write_placeholder_clips(tmp / "clips", tmp / "labels")
        stages = {
            "analysis.py, defaults": ["analysis.py", "--annotations-root", str(tmp / "annotations"), "--output-root"],
            "benchmark.py sham, defaults": ["benchmark.py", "--analysis-root", str(tmp / "labels"), "--dataset-root",
                                            str(tmp / "clips"), "--output-dir"],
        }
        print(f"1x synthetic exports; best of {args.repeat} alternating runs; reference: {args.reference}")
        print(f"{'stage':<30} {'this s':>7} {'reference s':>12} {'ratio':>6}")
        for name, cmd in stages.items():
            best = {"this": float("inf"), "reference": float("inf")}
            for k in range(args.repeat):
                for who, root in (("this", REPO), ("reference", args.reference.resolve())):
                    out = tmp / f"out-{who}-{k}"
                    best[who] = min(best[who], wall([sys.executable, str(root / cmd[0]), *cmd[1:], str(out)], root))
            print(f"{name:<30} {best['this']:>7.2f} {best['reference']:>12.2f} {best['this'] / best['reference']:>6.2f}")


if __name__ == "__main__":
    main()
