"""The installed commands ([project.scripts]) run the top-level scripts."""

import subprocess
import sys
import tomllib

from emolia_bench import entry

from .conftest import REPO


def test_every_command_names_an_entry_that_runs_a_bundled_script():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    commands = project["project"]["scripts"]
    bundled = project["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert len(commands) == 6
    for command, target in commands.items():
        module, function = target.split(":")
        assert module == "emolia_bench.entry" and callable(getattr(entry, function)), command
        script = f"{function}.py"
        assert (REPO / script).is_file() and bundled[script] == f"emolia_bench/_scripts/{script}"
        assert entry.script_path(function) == REPO / script  # a checkout finds the script beside the package


def test_a_command_behaves_as_its_script():
    # --help exits 0 with the script's usage; a bad option exits 2 with one line
    r = subprocess.run([sys.executable, "-c", "from emolia_bench.entry import compare; compare()", "--help"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: compare.py"), r.stderr
    r = subprocess.run([sys.executable, "-c", "from emolia_bench.entry import analysis; analysis()", "--no-such-flag"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
