"""Figures: produced, decodable, non-empty, and drawn from numbers that are tested elsewhere;
the two curve helpers are checked against the metrics module."""

import io

import numpy as np
import pytest

from emolia_bench.metrics import (
    best_threshold,
    binary_metrics,
    ranking_metrics,
    roc_points,
    threshold_sweep,
)

from .conftest import WORKED, run_script


def test_roc_points_integrate_to_auroc():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 2, 300)
    s = np.round(rng.normal(size=300) + t, 1)  # ties included
    fpr, tpr = roc_points(t, s)
    assert fpr[0] == tpr[0] == 0 and fpr[-1] == tpr[-1] == 1
    assert np.trapezoid(tpr, fpr) == pytest.approx(ranking_metrics(t, s)["auroc"], abs=1e-12)


def test_threshold_sweep_and_best_threshold_match_the_metrics():
    rng = np.random.default_rng(1)
    t = rng.integers(0, 2, 200)
    s = rng.normal(size=200) + 0.8 * t
    grid, ba = threshold_sweep(t, s, n=25)
    for g, b in zip(grid, ba, strict=True):
        assert b == pytest.approx(binary_metrics(t, (s >= g).astype(int))["balanced_accuracy"])
    best = best_threshold(t, s)
    assert best["balanced_accuracy"] == pytest.approx(binary_metrics(t, (s >= best["threshold"]).astype(int))["balanced_accuracy"])
    assert best["balanced_accuracy"] >= max(ba) - 1e-12  # no grid point beats the best candidate


def png_ok(path):
    from matplotlib.image import imread

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    img = imread(io.BytesIO(data))
    assert img.shape[0] > 100 and img.shape[1] > 100 and img[..., :3].std() > 0.01  # not blank


def test_stages_write_and_embed_their_figures(tmp_path):
    import shutil

    shutil.copytree(WORKED / "input", tmp_path, dirs_exist_ok=True)
    assert run_script("analysis.py", cwd=tmp_path, figures=True).returncode == 0
    assert run_script("benchmark.py", cwd=tmp_path, figures=True).returncode == 0
    an, bm = tmp_path / "analysis_outputs", tmp_path / "benchmark_outputs"
    expected = [an / "rater_coverage.png", an / "human_ceiling.png", an / "emolia-emo/agreement_by_task_type.png",
                an / "emolia-dim/agreement_by_dimension.png", bm / "emolia-emo/roc.png", bm / "emolia-dim/threshold.png",
                bm / "emolia-emo/balanced_accuracy_by_slice.png", bm / "emolia-dim/balanced_accuracy_by_dimension.png",
                bm / "emolia-emo/reliability.png", bm / "emolia-dim/reliability.png"]
    for p in expected:
        png_ok(p)
    report = (an / "report.md").read_text()
    assert "![Rater coverage](rater_coverage.png)" in report and "(emolia-emo/agreement_by_task_type.png)" in report
    assert "(agreement_by_polarity.png)" in (an / "emolia-dim/report.md").read_text()
    assert "![ROC curve](roc.png)" in (bm / "emolia-emo/report.md").read_text()
    assert "(reliability.png)" in (bm / "emolia-dim/report.md").read_text()
    # two runs draw identical pictures
    first = {p: p.read_bytes() for p in expected}
    assert run_script("analysis.py", cwd=tmp_path, figures=True).returncode == 0
    assert all(p.read_bytes() == first[p] for p in expected if "analysis_outputs" in str(p))


def test_no_figures_option(tmp_path):
    import shutil

    shutil.copytree(WORKED / "input", tmp_path, dirs_exist_ok=True)
    assert run_script("analysis.py", "--no-figures", cwd=tmp_path).returncode == 0
    assert not list((tmp_path / "analysis_outputs").rglob("*.png"))
    assert "![" not in (tmp_path / "analysis_outputs/report.md").read_text()


def test_slices_below_min_class_rows_are_marked_not_drawn():
    # The report found withheld slices drawn as points (a 0.75 on 4 negatives, without interval).
    from emolia_bench.figures import withheld_slices

    records = [{"n_positive": 30.0, "n_negative": 25.0, "balanced_accuracy_ci_low": 0.4},
               {"n_positive": 30.0, "n_negative": 4.0, "balanced_accuracy_ci_low": None},
               {"n_positive": 0.0, "n_negative": 50.0, "balanced_accuracy_ci_low": None},
               {"balanced_accuracy_ci_low": None}, {"balanced_accuracy_ci_low": 0.3}]
    assert withheld_slices(records, 20).tolist() == [False, True, True, True, False]
    assert withheld_slices(records, 0).tolist() == [False, False, False, True, False]
