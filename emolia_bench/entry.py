"""The installed commands (``[project.scripts]``): ``emolia-analysis``, ``emolia-benchmark``, …
each run the top-level script of the same name, exactly as ``uv run <script>.py`` does.

The scripts stay where a reader finds them (the repository's top level, read top to bottom);
a wheel carries copies of them inside the package (``emolia_bench/_scripts/``, pyproject's
``force-include``), and a checkout or editable install finds them beside the package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .cli import run

HERE = Path(__file__).resolve().parent


def script_path(name: str) -> Path:
    """The script ``<name>.py``: bundled in an installed wheel, else beside the package."""
    for path in (HERE / "_scripts" / f"{name}.py", HERE.parent / f"{name}.py"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"{name}.py is neither bundled with emolia_bench nor beside it ({HERE.parent})")


def load(name: str):
    """The script as a module (its top level runs; its ``__main__`` block does not)."""
    spec = importlib.util.spec_from_file_location(f"emolia_bench_script_{name}", script_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(name: str) -> None:
    run(load(name).main)


def anonymize() -> None:
    run_script("anonymize")


def analysis() -> None:
    run_script("analysis")


def benchmark() -> None:
    run_script("benchmark")


def compare() -> None:
    run_script("compare")


def sham_clap_server() -> None:
    run_script("sham_clap_server")


def clap_server() -> None:
    sys.exit(load("clap_server").main())  # as the script ends: uvicorn handles its own signals
