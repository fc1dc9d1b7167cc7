"""Anonymize raw annotator exports: every username becomes a stable ``user_<i>`` id.

    uv run anonymize.py --raw-root annotations_raw --out-root annotations

Reads annotations_raw/<subset>/{annotations.csv, users.csv[, flags.csv]} and writes the same
files to annotations/<subset>/ with only the usernames replaced (rows and other columns
unchanged). The raw -> anonymous map lives next to the raw files, in
annotations_raw/<subset>/_anon_map.csv, and is honoured on every later run: an annotator keeps
the same id forever and new annotators get the next free ids. If a raw name would appear
anywhere in the output (free-text flag reasons included) nothing is written and the run stops
with exit code 2.
"""

import argparse
from pathlib import Path

from emolia_bench.cli import ArgumentParser, run
from emolia_bench.defaults import SUBSET_NAMES


def arguments() -> argparse.ArgumentParser:
    """The script's options (its --help; the README's table is checked against them)."""
    parser = ArgumentParser(__doc__, prog=Path(__file__).name)
    parser.add_argument("--raw-root", type=Path, default=Path("annotations_raw"),
                        help="folder with one raw export folder per subset (default: annotations_raw)")
    parser.add_argument("--out-root", type=Path, default=Path("annotations"),
                        help="where the anonymized folders are written (default: annotations)")
    parser.add_argument("--subsets", "--subset", nargs="+", default=["both"], choices=[*SUBSET_NAMES, "both"],
                        help="subsets to process (default: both = every subset folder under --raw-root)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = arguments()
    args = parser.parse_args(argv)

    from emolia_bench.anonymize import MAP_FILE, anonymize_subset, load_raw, raw_names
    from emolia_bench.outputs import csv_bytes, write_outputs
    from emolia_bench.subsets import subsets_to_run

    raw, out = args.raw_root.resolve(), args.out_root.resolve()
    if out == raw or raw in out.parents:
        from emolia_bench.errors import InputError

        raise InputError("--out-root", f"{args.out_root} is {'the raw root' if out == raw else 'inside the raw root'} "
                                       f"{args.raw_root}; the anonymized copies would overwrite or sit among the raw "
                                       "exports (and their name map): choose a folder outside it")
    # Compute every subset first: a failure in any of them leaves all outputs and maps untouched.
    # every subset's annotators (those under the raw root, chosen or not) are searched in every output
    present = {s.name: (s, load_raw(args.raw_root / s.name, s)) for s in subsets_to_run(["both"], args.raw_root, "annotations.csv")}
    chosen = subsets_to_run(args.subsets, args.raw_root, "annotations.csv")
    raws = [present.get(s.name) or (s, load_raw(args.raw_root / s.name, s)) for s in chosen]
    everyone = set().union(*(raw_names(frames) for _, frames in [*present.values(), *raws]))
    results = [anonymize_subset(args.raw_root / s.name, s, frames, everyone) for s, frames in raws]

    for r in results:
        write_outputs(args.out_root / r.subset.name, r.files)
        write_outputs(args.raw_root / r.subset.name, {MAP_FILE: csv_bytes(r.mapping)})
        c = r.counts
        print(f"{r.subset.name}: {c['annotations']} annotations, {c['users']} users, {c['flags']} flags, "
              f"{c['annotators']} annotators ({c['new_ids']} new ids) -> {args.out_root / r.subset.name}")
    return 0


if __name__ == "__main__":
    run(main)
