"""Compare two or more benchmark runs: a leaderboard and paired significance tests.

    uv run compare.py benchmark_outputs/model_a benchmark_outputs/model_b --output-dir comparison

Each argument is a folder benchmark.py wrote (with <subset>/predictions.csv and summary.json).
Runs must cover the same subsets with the same filter and the same rows; anything else is
refused (exit 2). Writes to --output-dir: leaderboard.md and leaderboard.csv (balanced accuracy
with its clip-bootstrap interval per subset and slice, best first), pairwise.csv (for every
pair of runs and subset: the difference in balanced accuracy with a paired clip-bootstrap
interval and p-value, and a clip-level sign-flip permutation test; the same paired interval and
p for the macro AUROC and the cross-validated balanced accuracy), pairwise_by_slice.csv (the
balanced-accuracy difference per task type / polarity with Benjamini–Hochberg q-values),
comparison.json,
comparison.png (the paired differences: read this one) and leaderboard.png (each run's own
balanced accuracy and interval). Runs are ranked by macro AUROC; a run that calls one class on
99 % of its rows or more is flagged. Deterministic for a given --seed.
"""

import argparse
import sys
from pathlib import Path

from emolia_bench.cli import ArgumentParser, run
from emolia_bench.defaults import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, SUBSET_NAMES


def arguments() -> argparse.ArgumentParser:
    """The script's options (its --help; the README's table is checked against them)."""
    p = ArgumentParser(__doc__, prog=Path(__file__).name)
    p.add_argument("runs", nargs="+", type=Path, help="benchmark output folders (two or more)")
    p.add_argument("--names", nargs="+", help="display names, one per run (default: the folder names)")
    p.add_argument("--output-dir", type=Path, default=Path("comparison_outputs"),
                   help="where the leaderboard is written (default: comparison_outputs)")
    p.add_argument("--bootstrap-draws", type=int, default=BOOTSTRAP_DRAWS, help=f"paired bootstrap draws (default: {BOOTSTRAP_DRAWS})")
    p.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=f"bootstrap seed (default: {BOOTSTRAP_SEED})")
    p.add_argument("--no-figures", action="store_true", help="skip comparison.png and leaderboard.png")
    return p


def main(argv: list[str] | None = None) -> int:
    p = arguments()
    args = p.parse_args(argv)
    if len(args.runs) < 2:
        p.error("give at least two runs to compare")
    names = args.names or [r.name if [x.name for x in args.runs].count(r.name) == 1 else f"{r.parent.name}/{r.name}"
                           for r in args.runs]
    if len(names) != len(args.runs) or len(set(names)) != len(names):
        p.error("--names needs one distinct name per run")

    from emolia_bench.compare import compare, separability
    from emolia_bench.outputs import csv_bytes, json_bytes, write_outputs
    from emolia_bench.reports import comparison_report
    from emolia_bench.resampling import Bootstrap, default_threads
    from emolia_bench.summary import run_record

    bootstrap = Bootstrap(draws=args.bootstrap_draws, seed=args.seed, threads=default_threads())
    board, pairs, by_slice, references = compare(args.runs, names, bootstrap=bootstrap)
    outputs = {
        "leaderboard.csv": csv_bytes(board),
        "pairwise.csv": csv_bytes(pairs),
        "pairwise_by_slice.csv": csv_bytes(by_slice),
        "rank_by_reference.csv": csv_bytes(references),
        "comparison.json": json_bytes({"runs": dict(zip(names, map(str, args.runs), strict=True)),
                                       "bootstrap": {"seed": args.seed, "draws": args.bootstrap_draws, "unit": "clip"},
                                       "leaderboard": board.to_dict(orient="records"),
                                       "pairwise": pairs.to_dict(orient="records"),
                                       "separability": separability(pairs),
                                       "pairwise_by_slice": by_slice.to_dict(orient="records"),
                                       "rank_by_reference": references.to_dict(orient="records"),
                                       "run": run_record("compare.py", sys.argv[1:] if argv is None else list(argv),
                                                         [run / s / "predictions.csv" for run in args.runs
                                                          for s in SUBSET_NAMES if (run / s).is_dir()])}),
    }
    figure = None
    if not args.no_figures:
        from emolia_bench.figures import comparison, paired_differences

        # read the paired differences (comparison.png); each run's own interval is beside it
        outputs["comparison.png"] = paired_differences(pairs.to_dict(orient="records"))
        overall = board[board["slice"] == "overall"].to_dict(orient="records")
        outputs["leaderboard.png"] = comparison(overall, "Balanced accuracy at the threshold, overall")
        figure = "comparison.png"
    outputs["leaderboard.md"] = comparison_report(board, pairs, figure, draws=args.bootstrap_draws, seed=args.seed,
                                                  separated=separability(pairs), by_slice=by_slice,
                                                  references=references).encode()
    write_outputs(args.output_dir, outputs)
    print(outputs["leaderboard.md"].decode().split("## Leaderboard", 1)[-1].split("## ", 1)[0].strip())
    return 0


if __name__ == "__main__":
    run(main)
