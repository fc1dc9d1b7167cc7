"""analysis.py end to end: the worked example's expected outputs (computed by the reference
tool, not by us), determinism, degenerate inputs, and the real exports' published figures."""

import json
import shutil

import pytest

from .conftest import REAL, WORKED, needs, run_script, snapshot

EXPECTED = WORKED / "expected" / "analysis_outputs"


def assert_same(got, want, path=""):
    """Every value present in ``want`` equals ``got`` (floats to 1e-7, types otherwise exact)."""
    if isinstance(want, dict):
        for k in want:
            assert k in got, f"missing {path}/{k}"
            assert_same(got[k], want[k], f"{path}/{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got is not None and abs(got - want) <= 1e-7, f"{path}: {got} != {want}"
    else:
        assert got == want and type(got) is type(want), f"{path}: {got!r} != {want!r}"


@pytest.fixture
def worked_outputs(worked_analysed):
    return worked_analysed / "analysis_outputs"


@pytest.mark.parametrize("subset", ["emolia-emo", "emolia-dim"])
def test_worked_example_csvs_are_byte_identical(worked_outputs, subset):
    for want in sorted((EXPECTED / subset).glob("*.csv")):
        got = worked_outputs / subset / want.name
        assert got.read_bytes() == want.read_bytes(), f"{subset}/{want.name} differs"


@pytest.mark.parametrize("subset", ["emolia-emo", "emolia-dim"])
def test_worked_example_summary(worked_outputs, subset):
    got = json.loads((worked_outputs / subset / "summary.json").read_text())
    assert_same(got, json.loads((EXPECTED / subset / "summary.json").read_text()))


def test_worked_example_ours_additions(worked_outputs):
    dim = json.loads((worked_outputs / "emolia-dim" / "summary.json").read_text())
    # the flag by user_4 on VOLT/6/positive/sample_09 names an item nobody rated
    assert [(f["username"], f["file_name"]) for f in dim["flags_unmatched"]] == [("user_4", "sample_09.mp3")]
    emo = json.loads((worked_outputs / "emolia-emo" / "summary.json").read_text())
    assert emo["bootstrap"]["draws"] >= 1000
    lo, hi = emo["agreement"]["human_pairwise_accuracy_ci95"]
    assert lo <= emo["agreement"]["human_pairwise_accuracy"] <= hi
    for name in ("report.md", "emolia-emo/report.md", "emolia-dim/report.md"):
        text = (worked_outputs / name).read_text()
        assert "NaN" not in text and "nan" not in text.split()
    report = (worked_outputs / "report.md").read_text()
    assert "not from any model" in report
    # the corrected pairwise exact agreement (0.569444…) rests on 4 complete items: below the
    # default --min-items it is a sentence, not a number; with --min-items 1 it is shown
    assert "- pairwise exact agreement (binary): 4 items rated by 3 raters (complete): too few" in report
    assert "0.569" not in report


def test_min_items_decides_which_figures_are_shown(tmp_path):
    r = run_script("analysis.py", "--annotations-root", WORKED / "input" / "annotations", "--output-root", tmp_path,
                   "--min-items", "1", "--subsets", "emolia-emo")
    assert r.returncode == 0, r.stderr
    report = (tmp_path / "report.md").read_text()
    assert "| pairwise exact agreement (binary) | 0.569 |" in report  # corrected pairwise exact, 3 decimals
    assert json.loads((tmp_path / "emolia-emo/summary.json").read_text())["agreement_detail"]["min_items"] == 1


def test_two_runs_write_identical_bytes(worked_analysed, tmp_path):
    # the command that made the shared fixture, run again into another folder: the same bytes
    # (the run record leaves the output folder out)
    r = run_script("analysis.py", "--output-root", tmp_path, cwd=worked_analysed)
    assert r.returncode == 0
    assert snapshot(tmp_path) == snapshot(worked_analysed / "analysis_outputs")


def test_degenerate_panel_gives_nulls_not_crashes(tmp_path):
    # every item has a single rater who always says "no": no pairs, no complete items, no variation
    ann = tmp_path / "in" / "emolia-dim"
    ann.mkdir(parents=True)
    rows = [f"id{i},user_{i % 2},TEMP,{i},positive,s{i}.mp3,no,1,1,2026-04-01 10:00:0{i}" for i in range(4)]
    (ann / "annotations.csv").write_text(
        "annotation_id,username,dimension,level,polarity,file_name,rating,reaction_time_ms,sample_time_ms,created_at\n"
        + "\n".join(rows) + "\n")
    shutil.copy(WORKED / "input/annotations/emolia-dim/users.csv", ann / "users.csv")
    r = run_script("analysis.py", "--annotations-root", tmp_path / "in", "--output-root", tmp_path / "out",
                   "--subsets", "emolia-dim")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "out/emolia-dim/summary.json").read_text())
    a = s["agreement"]
    assert a["exact_3way_binary"] is None and a["fleiss_binary_kappa"] is None
    assert a["pairwise_exact_binary"] is None and a["human_pairwise_accuracy"] is None
    assert a["human_loo_accuracy"] is None and a["human_loo_n_annotations"] == 0.0
    assert a["krippendorff_alpha_binary"] is None and a["pairwise_binary_kappa"]["mean"] is None
    assert s["augmented_agreement"]["preselection_n_eligible_items"] == 0
    assert "n/a" in (tmp_path / "out/report.md").read_text()


def test_bad_input_exits_2_and_leaves_outputs_alone(tmp_path):
    good = tmp_path / "in" / "emolia-emo"
    good.mkdir(parents=True)
    (good / "annotations.csv").write_text(
        "annotation_id,username,source_emotion,queried_emotion,task_type,file_name,rating,reaction_time_ms,sample_time_ms,created_at\n"
        "a,user_0,Awe,Awe,affirmative,A.mp3,strongly_present,1,1,2026-04-01 10:00:00\n")
    (good / "users.csv").write_text("username,is_active,is_admin,onboarded,annotation_count,created_at,age,"
                                    "languages,gender,consent,degree,expertise,listening_setup\n"
                                    "user_0,1,0,True,0,x,30,English,F,True,MSc,1,Speakers\n")
    out = tmp_path / "out"
    assert run_script("analysis.py", "--annotations-root", tmp_path / "in", "--output-root", out,
                      "--subsets", "emolia-emo").returncode == 0
    before = snapshot(out)
    with open(good / "annotations.csv", "a") as f:
        f.write("b,user_0,Awe,Awe,affirmative,B.mp3,very_present,1,1,2026-04-01 10:00:00\n")
    r = run_script("analysis.py", "--annotations-root", tmp_path / "in", "--output-root", out, "--subsets", "emolia-emo")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "annotations.csv" in r.stderr and "row 2" in r.stderr and "'rating'" in r.stderr
    assert snapshot(out) == before


@needs(REAL)
def test_real_dim_matches_published_figures(tmp_path):
    r = run_script("analysis.py", "--annotations-root", REAL / "emolia-dim" / "annotations", "--output-root", tmp_path,
                   "--subsets", "emolia-dim")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "emolia-dim/summary.json").read_text())
    # upstream's published summary for the same file
    assert s["rows_raw"] == 11805 and s["items_total"] == 11257
    assert s["rater_coverage"] == {"1": 10717, "2": 532, "3": 8}


@needs(REAL)
def test_real_emo_structure(tmp_path):
    r = run_script("analysis.py", "--annotations-root", REAL / "emolia-emo" / "annotations", "--output-root", tmp_path,
                   "--subsets", "emolia-emo")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "emolia-emo/summary.json").read_text())
    # SOURCE.md: 3 annotators, 7,988 items, 7,984 rated by all three, 33 re-ratings
    assert s["items_total"] == 7988 and s["items_complete"] == 7984
    assert s["rows_raw"] - s["rows_deduplicated"] == 33
    assert s["annotators"] == ["user_0", "user_1", "user_2"]
    # with every rater on every complete item, our pairwise exact equals upstream's definition,
    # so it must sit between the exact-3-way share and 1
    a = s["agreement"]
    assert a["exact_3way_binary"] <= a["pairwise_exact_binary"] <= 1


@needs(REAL)
def test_a_root_with_one_subset_runs_that_subset_by_default(tmp_path):
    # ../shared/real/emolia-dim/annotations holds only emolia-dim/: the default "both" means
    # every subset present, so analysis and benchmark run it alone
    r = run_script("analysis.py", "--annotations-root", REAL / "emolia-dim" / "annotations", "--output-root",
                   tmp_path / "an", "--no-figures")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "an").iterdir()) == ["emolia-dim", "report.md"]
    r = run_script("benchmark.py", "--analysis-root", tmp_path / "an", "--dataset-root", tmp_path / "nodata",
                   "--output-dir", tmp_path / "bench", "--no-figures", "--limit", "5")
    # clips absent: written as audio_missing rows, and since no row could be scored, exit 1 with the cause
    assert r.returncode == 1 and "emolia-dim: no row could be scored: 5 × audio_missing" in r.stderr, r.stderr
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == ["emolia-dim"]
    # a subset named explicitly must be there
    r = run_script("analysis.py", "--annotations-root", REAL / "emolia-dim" / "annotations", "--output-root",
                   tmp_path / "an2", "--subsets", "emolia-emo")
    assert r.returncode == 2 and "emolia-emo" in r.stderr and "not found" in r.stderr


def test_a_root_with_no_subset_is_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    for script, option in (("analysis.py", "--annotations-root"), ("anonymize.py", "--raw-root"),
                           ("benchmark.py", "--analysis-root")):
        r = run_script(script, option, tmp_path / "empty")
        assert r.returncode == 2 and "no subset folder found" in r.stderr and "Traceback" not in r.stderr, (script, r.stderr)


def test_the_dim_flags_are_copied_byte_for_byte_as_upstream_does(worked_outputs):
    src = WORKED / "input/annotations/emolia-dim/flags.csv"
    assert (worked_outputs / "emolia-dim/flags.csv").read_bytes() == src.read_bytes()
    assert not (worked_outputs / "emolia-emo/flags.csv").exists()
