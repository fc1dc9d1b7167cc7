"""emolia-bench: human-agreement analysis and model scoring for emotional-speech benchmarks.

The top-level scripts are the stages (anonymize.py, analysis.py, benchmark.py, compare.py, the
two servers); the logic lives here, as plain functions over DataFrames, one module per concept:

- ``defaults``      subset names, seeds and draw counts, importable without numpy (fast --help)
- ``errors``        InputError: bad input, reported as one line naming file, row and column
- ``cli``           the one place where errors become exit codes
- ``subsets``       the two subsets described once, as data
- ``io``            loaders that validate every input at the boundary
- ``outputs``       strict JSON, CSV through pandas, atomic sets of output files
- ``anonymize``     username replacement with a stable map
- ``labels``        cleaning, majority vote, benchmark labels and slice tables
- ``agreement``     inter-rater agreement and the human upper bound
- ``resampling``    the bootstrap: one explicit Bootstrap value, resampled units (items, clips)
- ``metrics``       classification and ranking metrics, slice tables with clip intervals, curves
- ``raters``        rater profiles: speed, present share, agreement with the others, who stands out
- ``rater_models``  latent-class rater models (Dawid–Skene, one-coin, MACE via crowd-kit) beside the majority
- ``ceiling``       the noise ceiling: the best agreement with a new vote any scorer can reach; mean-rating reliability
- ``analysis``      one subset's analysis: labels, agreement, summary.json
- ``selection``     which labelled items a benchmark run scores, their prompts, clips and clip ids
- ``scorers``       the model backends: the Scorer interface, a registry, sham / endpoint / clap
                    (transformers, sentence-transformers and remote-code checkpoints)
- ``cache``         the endpoint's on-disk response cache (append-only JSONL) and the store lock
- ``vector_store``  the embedding cache: binary per-rank shards, memory-mapped, torn tails ignored
- ``audio_loader``  clips decoded in worker processes (torch's DataLoader) while the model runs
- ``distributed``   torchrun's ranks: who embeds which clips, and the few collectives between them
- ``evaluation``    scored rows -> predictions, metric tables and the benchmark summary.json
- ``vs_humans``     the model as one more rater, scored on the humans' own targets; graded labels
- ``alt_test``      may the model replace a rater? the alternative annotator test, with a chance control
- ``soft_labels``   the model's probability against the vote fractions: Brier, JSD, soft AUROC, calibration
- ``thresholds``    cross-validated decision thresholds (folds by clip)
- ``ranking``       AUROC, macro AUROC and Spearman's ρ with clip-bootstrap intervals
- ``compare``       runs side by side: leaderboard and clip-paired tests
- ``summary``       the typed pieces of summary.json (Interval, Figure, the reliability rule), serialised once
- ``reports``       the Markdown reports
- ``figures``       the PNG figures (matplotlib, imported only when drawing)
- ``paths``         clip paths sent by clients, resolved inside the dataset root or refused
- ``sham_server``   the stand-in similarity endpoint (standard library only)
- ``clap_server``   a real CLAP model behind the same endpoint contract (FastAPI)
- ``presets``       named models (LAION's VoiceCLAP family): hub id, backend, audio defaults
- ``templates``     prompt templates: each wording scored, their ensemble and its spread
- ``tiny_clap``     tiny randomly initialised models (a CLAP, a remote-code one) for tests and demo
- ``tiny_voiceclap`` the tiny remote-code model's own modelling code (shipped with its checkpoint)
- ``entry``         the installed commands (emolia-analysis, …): each runs its top-level script
"""

__version__ = "0.1.0"
