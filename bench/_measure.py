"""Run a command in a child process and report its wall time and peak memory (max RSS)."""

from __future__ import annotations

import compileall
import json
import subprocess
import sys
import time
from pathlib import Path


def compile_package() -> None:
    """Write the bytecode of the emolia_bench package, so runs measure the steady state of any
    second run: Python caches a module's bytecode on first import, unless
    PYTHONDONTWRITEBYTECODE is set (as it is on the machines these figures come from), which
    would make every measured process recompile the package (~0.04 s)."""
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "emolia_bench", quiet=1)


def measure(cmd: list[str], cwd=None) -> dict:
    """Wall seconds and peak RSS (MB) of ``cmd``; the probe runs in its own process so the
    children's max RSS is the command's alone."""
    probe = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "r = subprocess.run(json.loads(sys.argv[1]), cwd=sys.argv[2] or None, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
        "wall = time.perf_counter() - t\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps({'wall': wall, 'peak_mb': peak, 'code': r.returncode, 'stderr': r.stderr.decode()[-2000:]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, json.dumps(cmd), str(cwd or "")], capture_output=True, text=True)
    result = json.loads(out.stdout)
    if result["code"] != 0:
        raise SystemExit(f"command failed ({result['code']}): {' '.join(cmd)}\n{result['stderr']}")
    return result


def machine_speed() -> str:
    """The machine's speed line: ``python -m timeit "sum(range(10**6))"`` as timeit prints it."""
    out = subprocess.run([sys.executable, "-m", "timeit", "sum(range(10**6))"], capture_output=True, text=True)
    return f'machine speed: python -m timeit "sum(range(10**6))": {out.stdout.strip()}'


FLOOR = [sys.executable, "-c", "import pandas, matplotlib.figure, matplotlib.backends.backend_agg"]


def import_floor(repeat: int = 5) -> float:
    """F: the best wall time of importing what every stage that draws needs (pandas and
    matplotlib's Agg figure), in a fresh interpreter with bytecode cached — the floor any
    such stage stands on. Stages are stated as multiples of it, measured in the same run."""
    return min(measure(FLOOR)["wall"] for _ in range(repeat))


def against_floor(cmd: list[str], repeat: int, cwd=None) -> tuple[dict, float]:
    """``repeat`` runs of ``cmd``, each right after a run of F's command: (the best run, the best
    F among those taken beside it). A bench runs for minutes on a machine whose speed drifts —
    F measured 0.555 s and 0.754 s at the start of two runs of the same morning — so a stage is
    divided by the F taken beside it, not by one taken minutes earlier."""
    runs, floors = [], []
    for _ in range(repeat):
        floors.append(measure(FLOOR)["wall"])
        runs.append(measure(cmd, cwd))
    return min(runs, key=lambda r: r["wall"]), min(floors)


def timings(cmd: list[str], cwd=None) -> dict[str, float]:
    """Seconds per phase of one run of a stage given ``--timings`` (parsed from its stderr)."""
    out = subprocess.run(cmd + ["--timings"], cwd=cwd, capture_output=True, text=True, check=True).stderr
    line = next(x for x in out.splitlines() if x.startswith("timings: "))
    return {k: float(v.split()[0]) for k, v in (part.split(" ", 1) for part in line[len("timings: "):].split(", "))}


def table(rows: list[dict], cols: list[str]) -> str:
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    line = "  ".join(c.ljust(widths[c]) for c in cols)
    body = ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join([line, "  ".join("-" * widths[c] for c in cols), *body])


_ = time  # re-exported for scripts that time in-process steps
