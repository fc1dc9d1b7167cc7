"""Score a model against the human labels, per slice, with intervals.

    uv run benchmark.py                                   # the sham scorer (no model)
    uv run benchmark.py --endpoint http://127.0.0.1:8765/v1/similarity
    uv run benchmark.py --model voiceclap-small --similarity logit      # LAION's model, in-process
    uv run benchmark.py --prompt-template "A voice full of {emotion}." --prompt-template "{emotion}"

For each subset, reads analysis_outputs/<subset>/benchmark_labels.csv (and summary.json for the
human reference numbers), selects rows with the filters below (in this order: min raters,
flags, unanimity, then --limit), builds each row's prompt and finds its clip under
--dataset-root, scores it, and writes benchmark_outputs/<subset>/: predictions.csv, metrics by
task type or polarity, by benchmark bucket and by queried emotion or dimension, summary.json
and report.md.

Scorers: by default the deterministic sham scorer (a hash of stem and prompt; reads no audio
but needs each clip to exist); --sampling-prior, the sampling prior as ±1 (the same, no audio
read). With --endpoint, a remote similarity server: requests run concurrently, failures are
retried with back-off, and every answer is cached on disk so an interrupted run resumes where
it stopped. Give --endpoint several times to spread requests over
replicas of one model. With --model PRESET or --clap-model, a model in-process (presets:
voiceclap-small, voiceclap-small-v2, voiceclap-large, voiceclap-large-v2), its clips decoded in
--clap-decode-workers processes; under `torchrun --nproc-per-node N benchmark.py ...` the
clips are shared among the N processes (one GPU each), and rank 0 writes the outputs.

Prompt templates: --prompt-template, repeatable (emolia-emo: a format string with {emotion};
emolia-dim: with {rubric}, the level's rubric text). Every template is scored on every row; the
headline is their ensemble (mean similarity) and the report adds each template's figures.

Exit codes: 0 every row scored; 1 outputs written but some rows could not be scored (see
evaluation_errors); 2 bad input, nothing written; 130 interrupted (finished answers cached).
"""

import time

STARTED = time.perf_counter()  # noqa: E402 - before the imports, for --timings

import argparse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from emolia_bench.audio_loader import default_decode_workers  # noqa: E402
from emolia_bench.cli import EXIT_PARTIAL, ArgumentParser, Phases, run  # noqa: E402
from emolia_bench.defaults import (  # noqa: E402
    ALT_EPSILON,
    ENDPOINT_GIVE_UP_AFTER,
    ENDPOINT_MAX_RETRIES,
    ENDPOINT_TIMEOUT,
    ENDPOINT_WORKERS,
    MIN_CLASS_ROWS,
    SUBSET_NAMES,
)
from emolia_bench.defaults import BOOTSTRAP_DRAWS as METRIC_DRAWS  # noqa: E402
from emolia_bench.defaults import BOOTSTRAP_SEED as METRIC_SEED  # noqa: E402
from emolia_bench.distributed import Ranks, rank_device  # noqa: E402
from emolia_bench.presets import PRESETS, add_loading_options  # noqa: E402


def arguments() -> argparse.ArgumentParser:
    """The script's options (its --help; the README's table is checked against them)."""
    p = ArgumentParser(__doc__, prog=Path(__file__).name)
    p.add_argument("--subset", "--subsets", nargs="+", default=["both"], choices=[*SUBSET_NAMES, "both"],
                   help="subsets to score (default: both = every subset analysis.py wrote labels for)")
    p.add_argument("--analysis-root", type=Path, default=Path("analysis_outputs"),
                   help="where analysis.py wrote its outputs (default: analysis_outputs)")
    p.add_argument("--dataset-root", type=Path, default=Path("dataset"),
                   help="folder holding emolia-emo/ and emolia-dim/ clips and the dim rubric (default: dataset)")
    p.add_argument("--output-dir", type=Path, default=Path("benchmark_outputs"),
                   help="where results are written, one folder per subset (default: benchmark_outputs)")
    g = p.add_argument_group("scoring")
    g.add_argument("--sampling-prior", action="store_true",
                   help="score the sampling prior itself (+1 where the item was sampled to be present, -1 otherwise; "
                        "reads no audio): the baseline that costs nothing, as a run compare.py ranks beside models")
    g.add_argument("--endpoint", action="append", metavar="URL",
                   help="similarity endpoint (POST JSON); repeat for replicas of one model; absent: sham scorer")
    g.add_argument("--model-tag", help="names the model in the response cache (default: the first endpoint URL); "
                                      "replicas of one model share it")
    g.add_argument("--threshold", type=float, default=0.0, help="predict present iff similarity >= threshold (default: 0.0)")
    g.add_argument("--timeout", type=float, default=ENDPOINT_TIMEOUT,
                   help=f"deadline in seconds for each whole request: connect, send, wait and read (default: {ENDPOINT_TIMEOUT:g})")
    g.add_argument("--no-audio-send", action="store_true",
                   help="omit audio_base64 from requests (for servers that read clips from their own dataset root)")
    g.add_argument("--workers", type=int, default=ENDPOINT_WORKERS,
                   help=f"requests in flight at most (default: {ENDPOINT_WORKERS})")
    g.add_argument("--max-retries", type=int, default=ENDPOINT_MAX_RETRIES,
                   help=f"retries per request on timeouts, connection errors, 429, 5xx and bad bodies (default: "
                        f"{ENDPOINT_MAX_RETRIES}: a 50%% fault rate still finishes)")
    g.add_argument("--give-up-after", type=float, default=ENDPOINT_GIVE_UP_AFTER,
                   help="give up on the endpoint when no request has succeeded for this many seconds; the rows left "
                        f"are errors and a re-run retries them (default: {ENDPOINT_GIVE_UP_AFTER:g})")
    g.add_argument("--cache-dir", type=Path, default=Path(".cache/emolia-bench"),
                   help="response cache for resuming (default: .cache/emolia-bench)")
    g.add_argument("--fresh", action="store_true", help="ignore cached responses (new answers are still cached)")
    g.add_argument("--prompt-template", action="append", metavar="TEMPLATE",
                   help="a wording of the query, repeatable: emolia-emo with {emotion}, emolia-dim with {rubric} (the "
                        "level's rubric text); each is scored and the headline is their ensemble (default: upstream's "
                        "prompt, 'Speech audio in which the speaker expresses or conveys {emotion}.' and '{rubric}')")
    c = p.add_argument_group("in-process model (needs the 'clap' extra and PyTorch)")
    c.add_argument("--model", choices=list(PRESETS), metavar="PRESET",
                   help=f"score in-process with a named model: {', '.join(f'{k} ({v.model_id}, {v.backend})' for k, v in PRESETS.items())}; "
                        "30 s of 16 kHz audio unless overridden; implies --trust-remote-code (printed)")
    c.add_argument("--clap-model", metavar="PATH_OR_ID",
                   help="score in-process with this checkpoint: a transformers ClapModel, a checkpoint with its own modelling "
                        "code (--trust-remote-code) or a sentence-transformers audio-text model; with --model, a local copy "
                        "that stands in for the preset's hub id")
    add_loading_options(c, "--clap-backend")  # --clap-backend, --trust-remote-code, --similarity (as clap_server.py)
    c.add_argument("--clap-device", default="auto",
                   help="auto (default: cuda when available), cpu, cuda or cuda:N; under torchrun, auto and cuda mean "
                        "each process's own GPU (cuda:LOCAL_RANK)")
    c.add_argument("--clap-decode-workers", type=int, metavar="N",
                   help="processes that read, decode and resample clips while the model runs (default: the cores this "
                        "process may use, shared among the ranks on the node, at most 8; 0 = in the main process)")
    c.add_argument("--clap-dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    c.add_argument("--clap-audio-batch-size", type=int, default=8, help="clips per forward pass (default: 8)")
    c.add_argument("--clap-text-batch-size", type=int, default=64, help="prompts per forward pass (default: 64)")
    c.add_argument("--clap-max-seconds", type=float,
                   help="use the first N seconds of each clip (deterministic; default: the preset's 30, else 10)")
    f = p.add_argument_group("row selection")
    f.add_argument("--limit", type=int, help="score a random sample of N rows after the filters, drawn clip by clip "
                                             "with --seed (recorded in summary.json and the report)")
    f.add_argument("--min-raters", type=int, default=1, help="keep items with at least N raters (default: 1)")
    f.add_argument("--exclude-flagged", action="store_true", help="drop items an annotator flagged as broken (dim)")
    f.add_argument("--unanimous-only", action="store_true", help="keep items where all of >=2 raters agree")
    f.add_argument("--require-3-raters", action="store_true", help="same as --min-raters 3")
    s = p.add_argument_group("intervals")
    s.add_argument("--bootstrap-draws", type=int, default=METRIC_DRAWS, help=f"clip-bootstrap draws (default: {METRIC_DRAWS})")
    s.add_argument("--seed", type=int, default=METRIC_SEED, help=f"bootstrap seed (default: {METRIC_SEED})")
    s.add_argument("--cv-folds", type=int, default=5,
                   help="folds (by clip) for the cross-validated thresholds (default: 5)")
    s.add_argument("--cv-seed", type=int, default=METRIC_SEED, help=f"seed of the fold assignment (default: {METRIC_SEED})")
    s.add_argument("--alt-epsilon", type=float, default=ALT_EPSILON,
                   help="the alternative annotator test's cost-benefit margin: the advantage the humans must keep "
                        f"for the model not to replace one (default: {ALT_EPSILON}; the paper: 0.2 experts, 0.15 skilled "
                        "annotators, 0.1 crowd-workers, smaller when the humans agree little)")
    s.add_argument("--min-class-rows", type=int, default=MIN_CLASS_ROWS,
                   help="a slice whose minority class has fewer rows gets no balanced-accuracy interval, and the report "
                        f"marks it too small (default: {MIN_CLASS_ROWS})")
    s.add_argument("--timings", action="store_true", help="print the seconds each phase took (to stderr)")
    s.add_argument("--no-figures", action="store_true",
                   help="skip the PNG figures (matplotlib's import alone takes about a second)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = arguments()
    command = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    if args.workers < 1 or args.timeout <= 0 or (args.limit is not None and args.limit < 0):
        p.error("--workers must be >= 1, --timeout > 0 and --limit >= 0")
    if args.cv_folds < 2:
        p.error("--cv-folds must be at least 2")
    if args.max_retries < 0 or args.give_up_after <= 0:
        p.error("--max-retries must be >= 0 and --give-up-after > 0")
    if args.clap_max_seconds is not None and not 0 < args.clap_max_seconds < float("inf"):
        p.error("--clap-max-seconds must be a positive number of seconds")
    if args.clap_audio_batch_size < 1 or args.clap_text_batch_size < 1:
        p.error("--clap-audio-batch-size and --clap-text-batch-size must be at least 1")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", args.clap_device):
        p.error(f"--clap-device {args.clap_device!r}: expected auto, cpu, cuda or cuda:N")
    if args.clap_decode_workers is not None and args.clap_decode_workers < 0:
        p.error("--clap-decode-workers must be >= 0")
    try:  # torchrun's processes: one rank of one under plain python
        ranks = Ranks.from_environment(os.environ)
    except ValueError as e:
        p.error(str(e))

    from tqdm import tqdm

    from emolia_bench.evaluation import EVALUATION_STEPS, error_causes, evaluate, predictions_frame
    from emolia_bench.io import (
        load_analysis_summary,
        load_labels,
        load_rater_channels,
        load_rater_model_labels,
        load_votes,
    )
    from emolia_bench.outputs import csv_bytes, json_bytes, write_outputs
    from emolia_bench.presets import resolve_model
    from emolia_bench.reports import benchmark_report, fraction, interval
    from emolia_bench.resampling import Bootstrap, default_threads
    from emolia_bench.scorers import get_scorer, progress_bar
    from emolia_bench.selection import (
        Filters,
        apply_filters,
        build_rows,
        limit_rows,
        template_prompts,
    )
    from emolia_bench.subsets import subsets_to_run
    from emolia_bench.summary import run_record
    from emolia_bench.templates import score_templates, templates_by_subset

    filters = Filters(min_raters=max(args.min_raters, 3 if args.require_3_raters else 1),
                      exclude_flagged=args.exclude_flagged, unanimous_only=args.unanimous_only)
    in_process = args.model is not None or args.clap_model is not None
    if sum([bool(args.endpoint), in_process, args.sampling_prior]) > 1:
        p.error("choose one scorer: --endpoint, an in-process model (--model / --clap-model) or --sampling-prior")
    if args.similarity != "cosine" and not in_process:
        p.error("--similarity applies to an in-process model; an endpoint returns its own (clap_server.py --similarity)")
    if ranks.world > 1 and not in_process:
        p.error("torchrun shares an in-process model's clips among its processes: give --model or --clap-model "
                "(an endpoint or the sham scorer runs as one process)")
    if in_process:
        choice = resolve_model(args.model, args.clap_model, args.clap_backend, args.clap_max_seconds, args.trust_remote_code)
        if choice.note:
            print(choice.note, file=sys.stderr)
        workers = args.clap_decode_workers
        scorer = get_scorer("clap", model=choice.model, device=rank_device(args.clap_device, ranks), dtype=args.clap_dtype,
                            audio_batch_size=args.clap_audio_batch_size, text_batch_size=args.clap_text_batch_size,
                            max_seconds=choice.max_seconds, cache_dir=args.cache_dir, fresh=args.fresh,
                            backend=choice.backend, similarity=args.similarity, trust_remote_code=choice.trust_remote_code,
                            flag="--model" if args.model is not None else "--clap-model", attention=args.attention,
                            decode_workers=default_decode_workers(ranks.local_world) if workers is None else workers,
                            ranks=ranks)
    elif args.endpoint:
        scorer = get_scorer("endpoint", endpoints=args.endpoint, timeout=args.timeout, workers=args.workers,
                            max_retries=args.max_retries, give_up_after=args.give_up_after,
                            cache_dir=args.cache_dir, fresh=args.fresh,
                            model_tag=args.model_tag, send_audio=not args.no_audio_send)
    elif args.sampling_prior:
        scorer = get_scorer("sampling_prior")
    else:
        scorer = get_scorer("sham")

    # Load and select every subset before scoring, so bad input stops the run before any work.
    phases = Phases(args.timings, STARTED)
    plans = []
    chosen = subsets_to_run(args.subset, args.analysis_root, "benchmark_labels.csv")
    templates = templates_by_subset(args.prompt_template, chosen)  # each template to the subset whose field it names
    for subset in chosen:
        with phases("load"):
            labels = load_labels(args.analysis_root / subset.name / "benchmark_labels.csv", subset)
            votes = load_votes(args.analysis_root / subset.name / "votes.csv", subset)
            rater_models = load_rater_model_labels(args.analysis_root / subset.name / "rater_models.csv", subset)
            channels = load_rater_channels(args.analysis_root / subset.name / "summary.json")
            human, min_items, human_reliable = load_analysis_summary(args.analysis_root / subset.name / "summary.json")
            kept, stats = apply_filters(labels, filters)
            if args.limit is not None:
                kept, stats["limit"] = limit_rows(kept, args.limit, args.seed)
            rows = build_rows(kept, subset, args.dataset_root, (templates[subset.name] or [None])[0])
            plans.append((subset, rows, stats, votes, (rater_models, channels), human, min_items, human_reliable))

    scored = []
    ranks.start()  # torchrun: every rank scores its share of each subset's clips; rank 0 evaluates and writes
    try:
        for subset, rows, *_ in plans:
            with phases("score"):
                with_audio = rows[rows["scorable"]]
                prompts = template_prompts(with_audio, subset, args.dataset_root, templates[subset.name])
                with progress_bar(scorer, len(with_audio) * len(prompts), f"{subset.name} ({scorer.mode})",
                                  show=ranks.is_main) as bar:
                    scored.append(score_templates(scorer, with_audio, prompts, args.dataset_root, bar))
    finally:
        ranks.stop()
    if not ranks.is_main:
        return 0

    bootstrap = Bootstrap(draws=args.bootstrap_draws, seed=args.seed, threads=default_threads())
    results, failed = [], 0
    for (subset, rows, stats, votes, (rater_models, channels), human, min_items, human_reliable), (result, per_template) \
            in zip(plans, scored, strict=True):
        with phases("evaluate"), tqdm(total=EVALUATION_STEPS, desc=f"{subset.name} (intervals)", unit="step",
                                       file=sys.stderr, mininterval=0.5) as bar:
            predictions = predictions_frame(rows, result, subset, args.threshold, args.dataset_root, per_template)
            r = evaluate(subset, rows, predictions, mode=scorer.mode, endpoint=scorer.endpoint, threshold=args.threshold,
                         filter_mode=filters.mode_name(subset), filter_stats=stats, human=human, votes=votes,
                         rater_models=rater_models, rater_channels=channels,
                         similarity_is_logit=in_process and args.similarity == "logit",
                         min_items=min_items, human_reliable=human_reliable,
                         bootstrap=bootstrap, min_class_rows=args.min_class_rows,
                         cv_folds=args.cv_folds, cv_seed=args.cv_seed, scorer_info=scorer.info(),
                         alt_epsilon=args.alt_epsilon,
                         templates=templates[subset.name], progress=bar)
        results.append(r)
        failed += r.summary["evaluation_errors"]

    outputs = {}
    for r in results:
        name = r.subset.name
        links = None
        if not args.no_figures:
            with phases("figures"):
                from emolia_bench.figures import benchmark_figures

                pngs, links = benchmark_figures(r, r.truth, r.scores)
                outputs.update({f"{name}/{file}": data for file, data in pngs.items()})
        with phases("write"):
            outputs[f"{name}/predictions.csv"] = csv_bytes(r.predictions)
            for file, table in r.tables.items():
                outputs[f"{name}/{file}"] = csv_bytes(table)
            root = args.analysis_root / name
            model = scorer.info() or {"mode": scorer.mode, "endpoint": scorer.endpoint,
                                      "model_tag": getattr(scorer, "model_tag", None)}
            r.summary["run"] = run_record("benchmark.py", command, [
                root / "benchmark_labels.csv", root / "votes.csv", root / "summary.json",
                *([args.dataset_root / r.subset.rubric_file] if r.subset.rubric_file else [])], model)
            outputs[f"{name}/summary.json"] = json_bytes(r.summary)
            outputs[f"{name}/report.md"] = benchmark_report(r, figures=links).encode()
    with phases("write"):
        write_outputs(args.output_dir, outputs)
    phases.report()

    for r in results:  # the headlines in the report's order, each with its interval and verdict
        s, o = r.summary, r.summary["overall"]
        a, cv = s["auroc_headline"], s["thresholds_cv"].get("per_prompt", {})
        print(f"{r.subset.name}: {s['rows_evaluated_ok']}/{s['rows_total']} rows scored ({s['mode']}, {s['filter_mode']}); "
              f"macro AUROC {fraction(a['macro_auroc'])} {interval(a['macro_auroc_ci95'])} ({a['macro_auroc_verdict']}); "
              f"cross-validated balanced accuracy {fraction(cv.get('balanced_accuracy'))} {interval(cv.get('ci95'))} "
              f"({cv.get('verdict', 'n/a')}); balanced accuracy at threshold {s['threshold']:g} "
              f"{fraction(o['balanced_accuracy'])} {interval(o['balanced_accuracy_ci95'])} ({o['verdict']}); "
              f"missing audio {s['missing_audio']}, errors {s['evaluation_errors']} -> {args.output_dir / r.subset.name}")
    if (line := scorer.summary_line()) is not None:
        print(line)
    code = 0
    for r in results:  # what went wrong, said where the user looks, not only in predictions.csv
        s = r.summary
        if s["rows_total"] and not s["rows_evaluated_ok"]:
            hint = f" (does --dataset-root {args.dataset_root} hold the clips?)" if s["missing_audio"] == s["rows_total"] else ""
            print(f"{r.subset.name}: no row could be scored: {error_causes(r.predictions)}{hint}", file=sys.stderr)
            code = EXIT_PARTIAL
        elif s["evaluation_errors"]:
            print(f"{r.subset.name}: {s['evaluation_errors']} row(s) could not be scored: {error_causes(r.predictions)}",
                  file=sys.stderr)
    if failed:
        print(f"{failed} row(s) could not be scored; re-run the same command to retry only those", file=sys.stderr)
        code = EXIT_PARTIAL
    return code


if __name__ == "__main__":
    run(main)
