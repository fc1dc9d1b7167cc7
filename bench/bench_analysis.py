"""Time analysis.py on realistic synthetic exports at 1× and 10× the real size.

    uv run bench/bench_analysis.py            # 1× and 10×
    uv run bench/bench_analysis.py --scales 1

1× ≈ 24,000 emo + 34,000 dim rows (the size of the real exports, on which upstream's script
takes ~41 s on these 2-core machines). Prints, per scale: rows, wall time of the whole
`python analysis.py` process (interpreter start and imports included), peak memory, rows per
second and the growth relative to 1×, for `--no-figures` (the computation) and, in the last
column, with figures. Targets: ≤ 2 s at 1×; ≤ 20 s and ≤ 2 GB at 10×.
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import compile_package, measure, table  # noqa: E402
from synth import write_exports  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", type=float, nargs="+", default=[1, 10])
    p.add_argument("--repeat", type=int, default=3, help="runs per scale; the best wall time is reported")
    args = p.parse_args()
    compile_package()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            root = Path(tmp) / f"x{scale:g}"
            counts = write_exports(root, scale)
            n = sum(counts.values())
            cmd = [sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(root / "annotations"),
                   "--output-root", str(root / "out")]
            runs = [measure(cmd + ["--no-figures"]) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["wall"])
            with_figures = min(measure(cmd)["wall"] for _ in range(args.repeat))
            rows.append({"scale": f"{scale:g}x", "emo rows": counts["emolia-emo"], "dim rows": counts["emolia-dim"],
                         "wall s": f"{best['wall']:.2f}", "peak MB": f"{max(r['peak_mb'] for r in runs):.0f}",
                         "rows/s": f"{n / best['wall']:,.0f}", "with figures s": f"{with_figures:.2f}",
                         "_wall": best["wall"], "_n": n})
    base = rows[0]
    for r in rows:
        r["time vs 1x"] = f"{r['_wall'] / base['_wall']:.1f}x for {r['_n'] / base['_n']:.0f}x rows"
        r["vs upstream ~41 s"] = f"{41 / r['_wall']:.0f}x faster" if r is base else ""
    print(f"analysis.py, both subsets, best of {args.repeat} (python {sys.version.split()[0]})")
    print(table(rows, ["scale", "emo rows", "dim rows", "wall s", "peak MB", "rows/s", "time vs 1x", "vs upstream ~41 s",
                       "with figures s"]))
    print("wall s, peak MB, rows/s: analysis.py --no-figures (the computation; targets apply here); "
          "'with figures s' adds the PNGs, mostly matplotlib's ~1 s import")


if __name__ == "__main__":
    main()
