"""Time analysis.py on realistic synthetic exports at 1×, 10× and 30× the real size, against
the import floor F measured in the same run.

    uv run bench/bench_analysis.py            # 1×, 10× and 30×
    uv run bench/bench_analysis.py --scales 1

1× ≈ 24,000 emo + 34,000 dim rows (the size of the real exports, on which upstream's script
takes ~41 s on these 2-core machines). Prints the machine's speed line, F (the wall time of
``import pandas, matplotlib.figure, matplotlib.backends.backend_agg``), then per scale: rows,
wall time of the whole `python analysis.py` process (interpreter start and imports included)
with and without figures, each also as a multiple of F — the F taken right before each of its
runs, so that the machine's drift during the bench does not enter the ratio — peak memory, and each phase's time
(`--timings`) with its growth against 1×. Targets (issue 18): at 1× the default ≤ 2.8 F and
--no-figures ≤ 1.6 F; at 10× --no-figures ≤ 14 F and ≤ 1 GB, every phase within 12× its 1× time.
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import against_floor, compile_package, import_floor, machine_speed, table, timings  # noqa: E402
from synth import write_exports  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PHASES = ("start", "load", "analyse", "figures", "write")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", type=float, nargs="+", default=[1, 10, 30])
    p.add_argument("--repeat", type=int, default=3, help="runs per scale; the best wall time is reported")
    args = p.parse_args()
    compile_package()
    print(machine_speed())
    floor = import_floor()
    print(f"F (import floor) = {floor:.3f} s at the start (best of 5)")
    rows, phase_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            root = Path(tmp) / f"x{scale:g}"
            counts = write_exports(root, scale)
            n = sum(counts.values())
            cmd = [sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(root / "annotations"),
                   "--output-root", str(root / "out")]
            repeat = args.repeat if scale <= 10 else 1
            best, f_best = against_floor(cmd + ["--no-figures"], repeat)
            default, f_default = against_floor(cmd, repeat)
            phase = min((timings(cmd) for _ in range(repeat)), key=lambda t: sum(t.values()))
            rows.append({"scale": f"{scale:g}x", "rows": f"{n:,}", "--no-figures s": f"{best['wall']:.2f}",
                         "F beside": f"{f_best:.3f}", "= F": f"{best['wall'] / f_best:.2f}",
                         "default s": f"{default['wall']:.2f}", "F beside ": f"{f_default:.3f}",
                         "default = F": f"{default['wall'] / f_default:.2f}",
                         "peak MB": f"{max(best['peak_mb'], default['peak_mb']):.0f}",
                         "_wall": best["wall"], "_n": n, "_phase": phase})
    base = rows[0]
    for r in rows:
        r["time vs 1x"] = f"{r['_wall'] / base['_wall']:.1f}x for {r['_n'] / base['_n']:.0f}x rows"
        phase_rows.append({"scale": r["scale"], **{k: f"{r['_phase'].get(k, 0):.3f}" for k in PHASES},
                           "growth vs 1x": ", ".join(f"{k} {r['_phase'].get(k, 0) / max(base['_phase'].get(k, 0), 1e-9):.1f}x"
                                                     for k in PHASES if k in base["_phase"])})
    print(f"analysis.py, both subsets, best of {args.repeat} (30x: one run) (python {sys.version.split()[0]})")
    print(table(rows, ["scale", "rows", "--no-figures s", "F beside", "= F", "default s", "F beside ", "default = F", "peak MB",
                       "time vs 1x"]))
    print("(each run is divided by the best F of the runs of F's command taken right before each of its runs)")
    print("targets: 1x default <= 2.8 F, 1x --no-figures <= 1.6 F; 10x --no-figures <= 14 F and <= 1000 MB")
    print("\nseconds per phase (--timings, with figures; best of the runs), and growth against 1x (target at 10x: <= 12x)")
    print(table(phase_rows, ["scale", *PHASES, "growth vs 1x"]))


if __name__ == "__main__":
    main()
