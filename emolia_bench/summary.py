"""The typed pieces summary.json is built from, each turned into JSON in one place.

* :class:`Interval` — a 95 % percentile interval. In summary.json it is ``[low, high]`` under a
  ``…ci95`` key (null when undefined: no resample gave a value); the CSV slice tables spell the
  same interval as two columns ``<metric>_ci_low`` / ``<metric>_ci_high`` (upstream's columns).
* :class:`Figure` — an estimate with its support: ``value`` (null when undefined), ``ci95``,
  ``n_items`` (the items it rests on), ``n_comparisons`` (rater pairs within items, or held-out
  votes), ``unit`` (what an item is here) and ``reliable``. Reliability is decided once, here:
  a figure is reliable when it rests on at least ``min_items`` items (analysis.py
  ``--min-items``); reports, figures and the console read the stored flag and withhold the value
  of an unreliable figure (they say the count instead).
* :class:`SliceRow` — a benchmark slice's metrics (counts as floats, as upstream writes them;
  undefined rates None) and its balanced-accuracy interval: in CSV tables and summary.json's
  slice lists under ``balanced_accuracy_ci_low`` / ``_ci_high`` (:meth:`SliceRow.record`), in
  headlines as ``balanced_accuracy_ci95``.
* :class:`Support` — the reliability rule alone, for rows that carry their own count (a rater
  pair's κ, a slice's exact agreement): ``Support(min_items).reliable(n)``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

# The human reference figures analysis.py writes at the top of summary.json under upstream's
# names (alias -> the key in its "agreement" block); benchmark.py copies them into its own.
HUMAN_ALIASES = (
    ("human_upper_bound_binary", "pairwise_exact_binary"),
    ("human_accuracy_binary", "human_pairwise_accuracy"),
    ("human_balanced_accuracy_binary", "human_pairwise_balanced_accuracy"),
    ("human_loo_accuracy_binary", "human_loo_accuracy"),
    ("human_loo_balanced_accuracy_binary", "human_loo_balanced_accuracy"),
    ("human_loo_n_annotations", "human_loo_n_annotations"),
)


class Interval(NamedTuple):
    """A 95 % interval; a tuple, so it is ``[low, high]`` in JSON."""

    low: float
    high: float


@dataclass(frozen=True)
class Support:
    """The minimum support of a figure: ``min_items`` items (analysis.py ``--min-items``)."""

    min_items: int

    def reliable(self, n_items: int) -> bool:
        return int(n_items) >= self.min_items


@dataclass(frozen=True)
class Figure:
    value: float | None
    ci95: Interval | None
    n_items: int
    n_comparisons: int
    unit: str
    reliable: bool
    min_pair_items: int | None = None  # for an unweighted mean over rater pairs: the smallest pair's items

    @classmethod
    def rated(cls, value: float | None, ci95: Interval | None, n_items: int, n_comparisons: int, unit: str,
              support: Support, min_pair_items: int | None = None) -> Figure:
        """A figure whose reliability is decided by ``support``: on its items, and for an
        unweighted mean over rater pairs also on the items of its smallest pair (every pair
        weighs the same, so a pair sharing a handful of items moves it as much as one sharing
        thousands)."""
        reliable = support.reliable(n_items) and (min_pair_items is None or support.reliable(min_pair_items))
        return cls(value, ci95, int(n_items), int(n_comparisons), unit, reliable,
                   None if min_pair_items is None else int(min_pair_items))

    def to_json(self) -> dict:
        out = {"value": self.value, "ci95": None if self.ci95 is None else [self.ci95.low, self.ci95.high],
               "n_items": self.n_items, "n_comparisons": self.n_comparisons, "unit": self.unit,
               "reliable": self.reliable}
        if self.min_pair_items is not None:
            out["min_pair_items"] = self.min_pair_items
        return out


@dataclass(frozen=True)
class SliceRow:
    n: float
    accuracy: float | None
    balanced_accuracy: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    tp: float
    fp: float
    tn: float
    fn: float
    specificity: float | None
    auroc: float | None
    average_precision: float | None
    n_positive: float
    n_negative: float
    ci95: Interval | None  # of the balanced accuracy
    #: bootstrap p of "differs from chance (0.5)", and the smallest difference from 0.5 the slice
    #: detects with 80 % power at 5 % (both None where the interval is withheld)
    balanced_accuracy_p_chance: float | None = None
    balanced_accuracy_mde80: float | None = None

    def record(self) -> dict:
        """Every figure by name, the interval as ``balanced_accuracy_ci_low`` / ``_ci_high``."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "ci95"}
        out["balanced_accuracy_ci_low"], out["balanced_accuracy_ci_high"] = self.ci95 if self.ci95 else (None, None)
        return out


# ---------------------------------------------------------------------------------------------
# what produced a summary.json: enough to reproduce it

LIBRARIES = ("numpy", "pandas", "scipy", "matplotlib", "aiohttp", "torch", "transformers", "sentence-transformers")


OUTPUT_OPTIONS = ("--output-root", "--output-dir")


def run_record(script: str, argv: list[str], inputs: list, model: dict | None = None) -> dict:
    """``summary.json["run"]``: the tool (package version, and the git commit of the checkout
    when it is one), the command line (the output folder option left out: it changes no number,
    and the same run written elsewhere writes the same bytes), the Python and key library
    versions (null when a library is not installed), every input file's sha256 (null when
    absent) and, for benchmark runs, the model (id, or endpoint and cache tag)."""
    import hashlib
    import platform
    from importlib import metadata
    from pathlib import Path

    from . import __version__

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    def sha256(path: Path) -> str | None:
        if not path.is_file():
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    return {"tool": {"name": "emolia-bench", "version": __version__, "git_commit": git_commit()},
            "command": [script, *_without_output(argv)], "python": platform.python_version(),
            "libraries": {name: version(name) for name in LIBRARIES},
            "inputs": {str(p): sha256(Path(p)) for p in inputs}, "model": model}


def _without_output(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in map(str, argv):
        if skip:
            skip = False
        elif arg in OUTPUT_OPTIONS:
            skip = True  # the option and its value
        elif not arg.startswith(tuple(f"{o}=" for o in OUTPUT_OPTIONS)):
            out.append(arg)
    return out


def git_commit() -> str | None:
    """The commit of the checkout this package runs from, or None (an installed copy, no git)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
