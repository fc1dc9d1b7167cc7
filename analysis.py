"""Majority-vote labels, inter-rater agreement and the human upper bound.

    uv run analysis.py --annotations-root annotations --output-root analysis_outputs

For each subset, reads annotations/<subset>/{annotations.csv, users.csv[, flags.csv]} and
writes to analysis_outputs/<subset>/: benchmark_labels.csv (one row per item: majority vote,
vote counts, bucket), the slice tables, incomplete_items.csv, summary.json (agreement: Cohen,
Fleiss, Krippendorff; the human ceiling, pairwise and leave-one-out, with bootstrap intervals)
and report.md; plus the combined analysis_outputs/report.md. Outputs are computed in full
before anything is written, and each file is replaced atomically.
"""

import time

STARTED = time.perf_counter()  # noqa: E402 - before the imports, for --timings

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from emolia_bench.cli import ArgumentParser, Phases, run  # noqa: E402
from emolia_bench.defaults import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, MIN_ITEMS, SUBSET_NAMES  # noqa: E402


def arguments() -> argparse.ArgumentParser:
    """The script's options (its --help; the README's table is checked against them)."""
    parser = ArgumentParser(__doc__, prog=Path(__file__).name)
    parser.add_argument("--annotations-root", type=Path, default=Path("annotations"),
                        help="folder with one anonymized export folder per subset (default: annotations)")
    parser.add_argument("--output-root", type=Path, default=Path("analysis_outputs"),
                        help="where results are written (default: analysis_outputs)")
    parser.add_argument("--subsets", "--subset", nargs="+", default=["both"], choices=[*SUBSET_NAMES, "both"],
                        help="subsets to analyse (default: both = every subset whose folder holds an annotations.csv; "
                             "a subset named explicitly must be there)")
    parser.add_argument("--bootstrap-draws", type=int, default=BOOTSTRAP_DRAWS,
                        help=f"bootstrap resamples for the ceiling intervals (default: {BOOTSTRAP_DRAWS}, minimum 1000)")
    parser.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=f"bootstrap seed (default: {BOOTSTRAP_SEED})")
    parser.add_argument("--no-figures", action="store_true",
                        help="skip the PNG figures (matplotlib's import alone takes about a second)")
    parser.add_argument("--min-items", type=int, default=MIN_ITEMS,
                        help=f"an agreement figure resting on fewer items is written with \"reliable\": false and left "
                             f"out of the reports' numbers (default: {MIN_ITEMS})")
    parser.add_argument("--exclude-raters", default="", metavar="USER[,USER…]",
                        help="re-run without these raters' votes (comma-separated usernames, as in the anonymized "
                             "export); recorded in summary.json. Nothing is excluded unless asked")
    parser.add_argument("--timings", action="store_true", help="print the seconds each phase took (to stderr)")
    parser.add_argument("--dataset-root", type=Path,
                        help="optional: the clips, to compare reaction times with clip durations in the rater profiles "
                             "(a <clip>.json sidecar with {\"duration\": seconds}, else the audio header)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = arguments()
    command = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.bootstrap_draws < 1000:
        parser.error("--bootstrap-draws must be at least 1000")
    if args.min_items < 1:
        parser.error("--min-items must be at least 1")
    excluded = tuple(sorted({u.strip() for u in args.exclude_raters.split(",") if u.strip()}))

    # Heavy imports after argument parsing, so --help is instant.
    from emolia_bench.analysis import analyze_subset
    from emolia_bench.errors import InputError
    from emolia_bench.io import load_annotations, load_flags, load_users
    from emolia_bench.outputs import csv_bytes, json_bytes, write_outputs
    from emolia_bench.reports import analysis_report, subset_section
    from emolia_bench.resampling import Bootstrap, default_threads
    from emolia_bench.subsets import subsets_to_run
    from emolia_bench.summary import run_record

    phases = Phases(args.timings, STARTED)
    loaded = []
    with phases("load"):
        for subset in subsets_to_run(args.subsets, args.annotations_root, "annotations.csv"):
            folder = args.annotations_root / subset.name
            annotations = load_annotations(folder / "annotations.csv", subset)
            users = load_users(folder / "users.csv")
            flags = load_flags(folder / "flags.csv", subset) if subset.has_flags else None
            loaded.append((subset, annotations, users, flags))
    unknown = set(excluded) - set().union(*(set(ann["username"].unique()) for _, ann, _, _ in loaded)) if excluded else set()
    if unknown:
        raise InputError("--exclude-raters", f"no rater named {', '.join(sorted(unknown))} in the annotations; "
                                             "expected usernames as they appear in annotations.csv")

    bootstrap = Bootstrap(draws=args.bootstrap_draws, seed=args.seed, threads=default_threads())
    with phases("analyse"):
        results = [analyze_subset(subset, annotations, users, flags, bootstrap=bootstrap, min_items=args.min_items,
                                  exclude_raters=excluded, dataset_root=args.dataset_root)
                   for subset, annotations, users, flags in loaded]

    outputs, links = {}, {}
    with phases("write"):
        for r in results:
            name = r.subset.name
            outputs[f"{name}/benchmark_labels.csv"] = csv_bytes(r.labels)
            for file, table in r.tables.items():
                outputs[f"{name}/{file}"] = csv_bytes(table)
            outputs[f"{name}/incomplete_items.csv"] = csv_bytes(r.incomplete)
            outputs[f"{name}/raters.csv"] = csv_bytes(r.raters)
            outputs[f"{name}/votes.csv"] = csv_bytes(r.votes)
            outputs[f"{name}/rater_models.csv"] = csv_bytes(r.rater_models)
            folder = args.annotations_root / name
            if r.subset.has_flags and (folder / "flags.csv").is_file():  # a copy of the flags read, as upstream writes it
                outputs[f"{name}/flags.csv"] = (folder / "flags.csv").read_bytes()
            r.summary["run"] = run_record("analysis.py", command, [folder / "annotations.csv", folder / "users.csv",
                                                                   *([folder / "flags.csv"] if r.subset.has_flags else [])])
            outputs[f"{name}/summary.json"] = json_bytes(r.summary)
    if not args.no_figures:
        with phases("figures"):
            from emolia_bench.figures import analysis_figures

            pngs, links = analysis_figures(results)
            outputs.update(pngs)
    with phases("write"):
        for r in results:
            outputs[f"{r.subset.name}/report.md"] = subset_section(r, level=1, figures=links.get(r.subset.name)).encode()
        outputs["report.md"] = analysis_report(results, figures=links.get("report")).encode()
        write_outputs(args.output_root, outputs)
    phases.report()

    def fmt(figure):  # 0.0 is a value, None is n/a; too few items is said, not printed
        if not figure["reliable"]:
            return f"too few items ({figure['n_items']})"
        return "n/a" if figure["value"] is None else f"{figure['value']:.3f}"

    for r in results:
        s, figs = r.summary, r.summary["agreement_detail"]["figures"]
        flagged = s["raters"]["flagged"]
        print(f"{r.subset.name}: {s['items_total']} items ({s['items_complete']} complete), "
              f"human pairwise acc {fmt(figs['human_pairwise_accuracy'])}, "
              f"LOO acc {fmt(figs['human_loo_accuracy'])}"
              + (f"; raters pointed out: {', '.join(flagged)}" if flagged else "") + f" -> {args.output_root / r.subset.name}")
    return 0


if __name__ == "__main__":
    run(main)
