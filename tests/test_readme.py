"""The README's option tables say what each script's --help says: every option listed exists, and
its stated default is the parser's default."""

import re

import pytest

from .conftest import REPO, script_module

SECTIONS = {"anonymize.py": "### 1.", "analysis.py": "### 2.", "benchmark.py": "### 3.",
            "sham_clap_server.py": "### 4.", "compare.py": "### 5."}


def readme_rows(heading: str) -> list[tuple[str, str]]:
    """(option, default) of the option table under ``heading`` (up to the next heading)."""
    text = (REPO / "README.md").read_text()
    start = text.index(heading)
    section = text[start:text.index("\n### ", start + 1)]
    rows = re.findall(r"^\| `(--[a-z0-9-]+)[^`]*` \| ([^|]*) \|", section, flags=re.M)
    assert rows, heading
    return [(option, default.strip()) for option, default in rows]


def stated(default: str, actual) -> bool:
    """Whether the README's default cell states the parser's default."""
    if default in ("off",):
        return actual is False
    if default.startswith("none"):
        return actual in (None, "")
    number = re.fullmatch(r"-?[\d.]+", default)
    if number:
        return actual is not None and float(default) == float(actual)
    code = re.fullmatch(r"`([^`]*)`", default)
    if code:
        value = actual[0] if isinstance(actual, list) else actual
        return str(value) == code.group(1)
    return True  # a phrase ("first endpoint URL", "all"): checked by reading


@pytest.mark.parametrize("script", list(SECTIONS))
def test_option_tables_match_the_parsers(script):
    parser = script_module(script).arguments()
    actions = {s: a for a in parser._actions for s in a.option_strings}
    for option, default in readme_rows(SECTIONS[script]):
        assert option in actions, f"{script}: README lists {option}, which --help does not"
        assert stated(default, actions[option].default), \
            f"{script} {option}: README says {default!r}, the parser's default is {actions[option].default!r}"
