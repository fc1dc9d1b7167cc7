"""Report cells are formatted by what their column holds, never guessed from the value."""

import re

import pytest

from emolia_bench.reports import COUNT, FRACTION, INTERVAL, SIGNED, TEXT, THRESHOLD, md_table

from .conftest import run_script


def test_counts_print_as_counts_and_fractions_as_fractions_whatever_their_type():
    # counts 0, 1 and 2 stored as floats (as upstream stores them), and 1234.0 with a separator;
    # fractions that happen to be whole (1.0, 0.0, 2.0) keep their 3 decimals
    table = md_table([("slice", TEXT), ("n", COUNT), ("rate", FRACTION), ("κ", SIGNED), ("threshold", THRESHOLD),
                      ("95 % CI", INTERVAL)],
                     [("a", 0.0, 1.0, 0.25, 0.0, [0.5, 1.0]),
                      ("b", 1.0, 0.0, -0.5, 0.1, None),
                      ("c", 2.0, 2.0, None, -1.0, [None, None]),
                      ("d|e", 1234.0, float("nan"), 0.0, 0.12345, [0.1234, 0.5678])])
    assert "| d\\|e | 1,234 | n/a | +0.000 | 0.1235 | [0.123, 0.568] |" in table
    assert "| a | 0 | 1.000 | +0.250 | 0.0000 | [0.500, 1.000] |" in table
    assert "| b | 1 | 0.000 | -0.500 | 0.1000 | n/a |" in table
    assert "| c | 2 | 2.000 | n/a | -1.0000 | n/a |" in table


def test_a_row_must_fill_every_declared_column():
    with pytest.raises(ValueError, match="2 cells in a table of 3 columns"):
        md_table([("a", TEXT), ("b", COUNT), ("c", FRACTION)], [("x", 1)])


COUNT_TITLES = {"n", "items", "LOO n", "eligible items", "annotators", "complete items", "annotations", "rows",
                "items (majority not tied)", "b", "c"}


def count_cells(report: str) -> list[str]:
    """Every cell of a column titled like a count, in every table of a Markdown report."""
    out, header = [], None
    for line in report.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        row = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if header is None:
            header = row
        elif not set(line) <= set("|-"):
            out += [c for title, c in zip(header, row, strict=False) if title in COUNT_TITLES]
    return out


def test_no_report_prints_a_count_with_decimals(tmp_path, worked_analysed):
    import shutil

    shutil.copytree(worked_analysed, tmp_path, dirs_exist_ok=True)
    assert run_script("benchmark.py", cwd=tmp_path).returncode == 0
    reports = list((tmp_path / "analysis_outputs").rglob("report.md")) + list((tmp_path / "benchmark_outputs").rglob("report.md"))
    assert len(reports) == 5
    seen = []
    for path in reports:
        found = count_cells(path.read_text())
        seen += found
        bad = [c for c in found if not re.fullmatch(r"\d{1,3}(,\d{3})*|n/a", c)]
        assert not bad, (path, bad)
    assert "1" in seen  # the worked example's one-item bucket (single_rater_absent) is a count of 1
