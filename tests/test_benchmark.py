"""benchmark.py: the worked example's expected outputs, sham vectors, prompts, filters, row
selection, missing audio and refusals."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from emolia_bench.scorers.sham import sham_similarity
from emolia_bench.selection import Filters, apply_filters

from .conftest import WORKED, run_script, snapshot
from .test_analysis import assert_same

EXPECTED = WORKED / "expected" / "benchmark_outputs"


def test_sham_test_vectors():
    # upstream's sham formula (README “Scorers”), bit-exact
    assert sham_similarity("EN_B00031_S07330_W000026",
                           "Speech audio in which the speaker expresses or conveys Affection.") == -0.1287922617961742
    assert sham_similarity("sample_00__TEMP_3_positive", "Normal tempo.") == 0.7706211205491895


@pytest.fixture
def worked(worked_analysed, tmp_path):
    """A fresh copy of the analysed project for each test (tests change files in it)."""
    shutil.copytree(worked_analysed, tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_worked_example_matches_expected(worked):
    r = run_script("benchmark.py", cwd=worked, full_draws=True)  # the defaults, as a user runs it
    assert r.returncode == 0, r.stderr
    for subset in ("emolia-emo", "emolia-dim"):
        for want in sorted((EXPECTED / subset).glob("*.csv")):
            got = (worked / "benchmark_outputs" / subset / want.name).read_text().splitlines()
            exp = want.read_text().splitlines()
            ncol = len(exp[0].split(","))
            # our extra columns come after upstream's; predictions are byte-identical
            cut = [",".join(line.split(",")[:ncol]) for line in got] if want.name != "predictions.csv" else got
            assert cut == exp, f"{subset}/{want.name}"
        assert_same(json.loads((worked / "benchmark_outputs" / subset / "summary.json").read_text()),
                    json.loads((EXPECTED / subset / "summary.json").read_text()))
    report = (worked / "benchmark_outputs/emolia-emo/report.md").read_text()
    assert report.startswith("# emolia-emo") and "## Score rubric" in report[:300]
    assert report.rstrip().splitlines()[-1].startswith("| Excellent")  # ends with the rubric's band table


def test_missing_clip_is_an_audio_missing_row(worked):
    (worked / "dataset/emolia-emo/data/Awe_best/B.mp3").unlink()
    r = run_script("benchmark.py", "--subset", "emolia-emo", cwd=worked)
    assert r.returncode == 0, r.stderr
    pred = pd.read_csv(worked / "benchmark_outputs/emolia-emo/predictions.csv", keep_default_na=False)
    missing = pred[pred["file_name"] == "B.mp3"]
    assert len(missing) == 2 and set(missing["error"]) == {"audio_missing"} and not missing["ok"].any()
    assert set(missing["pred_present"]) == {""} and set(missing["similarity"]) == {""}
    s = json.loads((worked / "benchmark_outputs/emolia-emo/summary.json").read_text())
    assert (s["rows_total"], s["rows_evaluated_ok"], s["missing_audio"], s["evaluation_errors"]) == (10, 8, 2, 0)
    assert s["overall"]["n"] == 8.0


def test_filters_limit_and_mode_names(worked):
    r = run_script("benchmark.py", "--subset", "emolia-dim", "--min-raters", "2", "--exclude-flagged", cwd=worked)
    assert r.returncode == 0, r.stderr
    s = json.loads((worked / "benchmark_outputs/emolia-dim/summary.json").read_text())
    # 8 items: 1 single-rater dropped, then the flagged TEMP/5/negative item -> 6 kept
    assert s["filter_stats"] == {"input": 8, "dropped_below_min_raters": 1, "dropped_flagged": 1,
                                 "dropped_non_unanimous": 0, "kept": 6}
    assert s["filter_mode"].startswith("stronger-evidence")
    assert "stronger-evidence" in (worked / "benchmark_outputs/emolia-dim/report.md").read_text()
    r = run_script("benchmark.py", "--subset", "emolia-emo", "--unanimous-only", "--limit", "2", cwd=worked)
    s = json.loads((worked / "benchmark_outputs/emolia-emo/summary.json").read_text())
    # unanimous emo items: A/Awe/aff, D/Awe/pen, B/Fear/ult -> kept 3, first 2 scored
    assert s["filter_stats"]["kept"] == 3 and s["rows_total"] == 2
    assert s["filter_mode"].startswith("unanimous-only")
    r = run_script("benchmark.py", "--subset", "emolia-emo", "--require-3-raters", cwd=worked)
    s = json.loads((worked / "benchmark_outputs/emolia-emo/summary.json").read_text())
    assert s["filter_stats"]["dropped_below_min_raters"] == 4 and s["filter_mode"].startswith("custom")


def test_filter_order_and_stats():
    labels = pd.DataFrame({"n_raters": [1, 2, 3, 3, 2], "flagged": [False, True, False, True, False],
                           "all_agree_binary": [False, True, True, False, False]})
    kept, stats = apply_filters(labels, Filters(min_raters=2, exclude_flagged=True, unanimous_only=True))
    assert stats == {"input": 5, "dropped_below_min_raters": 1, "dropped_flagged": 2, "dropped_non_unanimous": 1, "kept": 1}
    assert len(kept) == 1


def test_rubric_missing_falls_back_not_fails(worked):
    (worked / "dataset/emolia-dim/variables.json").unlink()
    r = run_script("benchmark.py", "--subset", "emolia-dim", cwd=worked)
    assert r.returncode == 0, r.stderr
    pred = pd.read_csv(worked / "benchmark_outputs/emolia-dim/predictions.csv")
    assert pred["prompt"].str.startswith("Speech audio matching the description of").all()


def test_labels_of_the_other_subset_are_refused(worked):
    out = worked / "benchmark_outputs"
    assert run_script("benchmark.py", cwd=worked).returncode == 0
    before = snapshot(out)
    shutil.copy(worked / "analysis_outputs/emolia-emo/benchmark_labels.csv",
                worked / "analysis_outputs/emolia-dim/benchmark_labels.csv")
    r = run_script("benchmark.py", cwd=worked)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "emolia-dim/benchmark_labels.csv" in r.stderr and "emolia-emo" in r.stderr
    assert snapshot(out) == before


def test_missing_labels_file(worked):
    r = run_script("benchmark.py", "--analysis-root", worked / "nowhere", cwd=worked)
    assert r.returncode == 2 and "benchmark_labels.csv" in r.stderr and "not found" in r.stderr


def test_outputs_are_deterministic(worked, tmp_path):
    # the same command twice: the same bytes (the run record names the command, so it is the same)
    run_script("benchmark.py", "--output-dir", tmp_path / "a", cwd=worked)
    first = snapshot(tmp_path / "a")
    run_script("benchmark.py", "--output-dir", tmp_path / "a", cwd=worked)
    assert snapshot(tmp_path / "a") == first
    text = (tmp_path / "a/emolia-dim/summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text


def test_only_regular_clips_inside_the_root_are_read_or_sent(worked, tmp_path_factory):
    # a FIFO named like a clip would block a reader forever; a link leading out of the dataset
    # root would send a foreign file's bytes. Both are error rows, in every scorer, and no hang.
    import os

    from .servers import scripted_server

    outside = tmp_path_factory.mktemp("outside") / "secret.mp3"
    outside.write_bytes(b"SECRET")
    clips = worked / "dataset/emolia-emo/data/Awe_best"
    (clips / "B.mp3").unlink()
    os.mkfifo(clips / "B.mp3")
    (clips / "C.mp3").unlink()
    (clips / "C.mp3").symlink_to(outside)
    for extra in ((), ("--endpoint", "URL", "--cache-dir", str(worked / "cache"))):
        with scripted_server() as (server, url):
            args = [a.replace("URL", url) for a in extra]
            r = run_script("benchmark.py", "--subset", "emolia-emo", *args, cwd=worked, timeout=60)
            sent = [p["audio_path"] for p in server.payloads]
        assert r.returncode == 1, r.stderr  # written, with error rows
        pred = pd.read_csv(worked / "benchmark_outputs/emolia-emo/predictions.csv", keep_default_na=False)
        errors = dict(zip(pred["file_name"], pred["error"], strict=True))
        assert errors["B.mp3"] == "audio_refused: a FIFO, not a regular file"
        assert errors["C.mp3"] == "audio_refused: audio_path escapes the dataset root"
        assert not any(p.endswith(("B.mp3", "C.mp3")) for p in sent)
        s = json.loads((worked / "benchmark_outputs/emolia-emo/summary.json").read_text())
        assert s["evaluation_errors"] == (pred["file_name"].isin(["B.mp3", "C.mp3"])).sum()


def test_a_dataset_root_that_is_a_file_is_refused(worked):
    before = snapshot(worked / "benchmark_outputs") if (worked / "benchmark_outputs").exists() else {}
    r = run_script("benchmark.py", "--dataset-root", "annotations/emolia-emo/users.csv", cwd=worked)
    assert r.returncode == 2 and "is not a folder" in r.stderr and "Traceback" not in r.stderr
    assert (snapshot(worked / "benchmark_outputs") if (worked / "benchmark_outputs").exists() else {}) == before


@pytest.mark.parametrize("content, said", [("[1, 2]", "holds a JSON list, not an object"),
                                           ("{not json", "is not valid JSON"),
                                           ('{"human_accuracy_binary": "high"}', "'human_accuracy_binary' holds 'high'")])
def test_a_malformed_analysis_summary_is_bad_input(worked, content, said):
    (worked / "analysis_outputs/emolia-emo/summary.json").write_text(content)
    r = run_script("benchmark.py", "--subset", "emolia-emo", cwd=worked)
    assert r.returncode == 2 and said in r.stderr and "summary.json" in r.stderr and "Traceback" not in r.stderr


def test_a_missing_analysis_summary_only_warns(worked):
    (worked / "analysis_outputs/emolia-emo/summary.json").unlink()
    r = run_script("benchmark.py", "--subset", "emolia-emo", cwd=worked)
    assert r.returncode == 0 and "not found; human reference numbers will be null" in r.stderr


def test_a_run_that_scores_no_row_exits_1_and_says_why(worked, tmp_path):
    # every clip missing (a wrong --dataset-root): outputs are written, the exit code is 1 and
    # stderr counts the cause per subset, pointing at the option
    r = run_script("benchmark.py", "--dataset-root", tmp_path / "nowhere", cwd=worked)
    assert r.returncode == 1, r.stderr
    emo_rows = len(pd.read_csv(worked / "analysis_outputs/emolia-emo/benchmark_labels.csv"))
    assert f"emolia-emo: no row could be scored: {emo_rows} × audio_missing" in r.stderr
    assert "does --dataset-root" in r.stderr and "Traceback" not in r.stderr
    assert (worked / "benchmark_outputs/emolia-emo/predictions.csv").is_file()


def test_every_summary_records_what_produced_it(worked):
    import hashlib

    r = run_script("benchmark.py", "--subset", "emolia-emo", cwd=worked)
    assert r.returncode == 0, r.stderr
    run = json.loads((worked / "benchmark_outputs/emolia-emo/summary.json").read_text())["run"]
    assert run["command"] == ["benchmark.py", "--subset", "emolia-emo", "--no-figures", "--bootstrap-draws", "200"]
    labels = Path("analysis_outputs/emolia-emo/benchmark_labels.csv")
    assert run["inputs"][str(labels)] == hashlib.sha256((worked / labels).read_bytes()).hexdigest()
    assert run["tool"]["version"] and run["libraries"]["numpy"] == np.__version__
    assert run["model"] == {"mode": "sham_hash", "endpoint": None, "model_tag": None}
    analysis = json.loads((worked / "analysis_outputs/emolia-emo/summary.json").read_text())["run"]
    assert analysis["command"][0] == "analysis.py" and len(analysis["inputs"]) == 2  # annotations, users


def test_limit_draws_a_seeded_sample_of_clips_not_the_first_rows(worked, tmp_path):
    # 5 of the emo labels, drawn clip by clip with the seed: the same seed the same rows, another
    # seed (very likely) others; recorded in summary.json and said in the report
    labels = pd.read_csv(worked / "analysis_outputs/emolia-emo/benchmark_labels.csv", keep_default_na=False)
    runs = {}
    for seed in ("1", "1", "2"):
        out = tmp_path / f"s{seed}_{len(runs)}"
        r = run_script("benchmark.py", "--subset", "emolia-emo", "--limit", "5", "--seed", seed, "--output-dir", out,
                       cwd=worked)
        assert r.returncode == 0, r.stderr
        runs[out] = pd.read_csv(out / "emolia-emo/predictions.csv", keep_default_na=False)
    (a, pa), (b, pb), (c, pc) = runs.items()
    assert len(pa) == 5 and pa.equals(pb)
    assert not pa[["file_name", "queried_emotion"]].equals(pc[["file_name", "queried_emotion"]])
    # the draw, by hand: files sorted, permuted with the seed, rows taken in that order
    files = np.sort(labels["file_name"].unique())
    position = dict(zip(files, np.random.default_rng(1).permutation(len(files)), strict=True))
    want = labels.assign(p=labels["file_name"].map(position)).sort_values("p", kind="stable").head(5).sort_index()
    assert list(pa["file_name"]) == list(want["file_name"]) and list(pa["queried_emotion"]) == list(want["queried_emotion"])
    s = json.loads((a / "emolia-emo/summary.json").read_text())
    assert s["filter_stats"]["limit"] == {"rows": 5, "seed": 1, "unit": "clip (file_name)", "of": len(labels)}
    assert "a random sample of 5 rows" in (a / "emolia-emo/report.md").read_text()


def test_human_figures_the_analysis_withholds_are_withheld_in_the_benchmark(worked):
    # analysed with --min-items 1000, no human figure of the worked example is reliable: the
    # benchmark records that verdict and its score rubric shows no number for them
    assert run_script("analysis.py", "--min-items", "1000", cwd=worked).returncode == 0
    r = run_script("benchmark.py", "--subset", "emolia-dim", cwd=worked)
    assert r.returncode == 0, r.stderr
    s = json.loads((worked / "benchmark_outputs/emolia-dim/summary.json").read_text())
    assert s["min_items"] == 1000 and s["human_reliable"]["human_accuracy_binary"] is False
    rubric = (worked / "benchmark_outputs/emolia-dim/report.md").read_text().split("## Score rubric")[1].split("##")[0]
    assert "| human pairwise accuracy (ceiling) | too few items (analysis report) |" in rubric
    assert f"{s['human_accuracy_binary']:.3f}" not in rubric


def test_weak_labels_are_counted_and_warned_about(demo_scored, tmp_path):
    # The report found: 239 of the 540 real dim items behind "stronger evidence (>= 2 raters)" are
    # 1-1 ties resolved to "no", without a word. Counted here from benchmark_labels.csv by hand.
    r = run_script("benchmark.py", "--analysis-root", demo_scored / "an", "--output-dir", tmp_path / "b",
                   "--subset", "emolia-dim", "--min-raters", "2", "--no-figures")
    assert r.returncode == 0, r.stderr
    labels = pd.read_csv(demo_scored / "an/emolia-dim/benchmark_labels.csv")
    kept = labels[labels["n_raters"] >= 2]
    s = json.loads((tmp_path / "b/emolia-dim/summary.json").read_text())
    ties = int(kept["majority_present_tie"].sum())
    assert s["label_support"] == {"items": len(kept), "one_rater": 0, "tie_resolved_to_absent": ties,
                                  "several_raters_agreeing": len(kept) - ties}
    report = (tmp_path / "b/emolia-dim/report.md").read_text()
    assert f"{ties:,} on an even split of the raters resolved to absent" in report
    assert ("⚠ weak labels" in report) == (ties / len(kept) > 0.25)
    # our count columns are whole numbers in the CSVs; upstream's n keeps its float form
    table = pd.read_csv(tmp_path / "b/emolia-dim/metrics_by_polarity.csv", dtype=str)
    for column in ("tp", "fp", "tn", "fn", "n_positive", "n_negative"):
        assert table[column].str.fullmatch(r"\d+").all(), column
    assert table["n"].str.endswith(".0").all()


def test_a_missing_dim_clip_is_named_where_it_belongs(worked):
    # upstream writes a missing dim clip's path (it follows from the item); emo clips are found by
    # search, so a missing one has no path (test above)
    clip = next((worked / "dataset/emolia-dim/data/TEMP").rglob("*.mp3"))
    rel = clip.relative_to(worked).as_posix()
    clip.unlink()
    r = run_script("benchmark.py", "--subset", "emolia-dim", cwd=worked)
    assert r.returncode == 0, r.stderr
    pred = pd.read_csv(worked / "benchmark_outputs/emolia-dim/predictions.csv", keep_default_na=False)
    row = pred[pred["audio_path"] == rel]
    assert len(row) == 1 and row["error"].iloc[0] == "audio_missing" and not row["ok"].iloc[0]
    _, dim, level, polarity, name = rel.split("/")[-5:]
    assert (row["dimension"].iloc[0], str(row["level"].iloc[0]), row["polarity"].iloc[0], row["file_name"].iloc[0]) == (
        dim, level, polarity, name)
