"""The package explains its own layout: its docstring names every module, once."""

import re

import emolia_bench

from .conftest import REPO


def test_package_docstring_lists_every_module_once():
    listed = re.findall(r"^- ``(\w+)``", emolia_bench.__doc__, flags=re.M)
    modules = sorted(p.stem for p in (REPO / "emolia_bench").glob("*.py") if p.stem != "__init__")
    modules += ["scorers"]  # a package
    assert sorted(listed) == sorted(modules)
