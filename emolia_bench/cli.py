"""The one place where errors become exit codes, shared by every top-level script."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager

from .errors import InputError

EXIT_OK = 0
EXIT_PARTIAL = 1  # benchmark: outputs written, but some rows could not be scored
EXIT_BAD_INPUT = 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse as every script uses it: a refused option is one line on stderr and exit 2 (the
    usage block stays in --help)."""

    def __init__(self, description: str | None = None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(description=description, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def invoke(main: Callable[..., int | None], argv: list[str] | None = None) -> int:
    """Run ``main(argv)`` and return its exit code: 2 with one line on stderr for bad input
    (:class:`InputError`, or argparse's own refusal), 130 on Ctrl-C, argparse's 0 for --help."""
    try:
        return main(argv) or EXIT_OK
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted; previous outputs are left as they were", file=sys.stderr)
        return 130
    except SystemExit as e:  # argparse: --help (0) or a refused option (2, its message already printed)
        return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT


def run(main: Callable[..., int | None]) -> None:
    """Exit with :func:`invoke`'s code: how every top-level script ends. Ctrl-C (SIGINT) raises
    KeyboardInterrupt even where the script was started with SIGINT ignored (a shell's
    background job inherits that), so an interrupt always ends the run with 130."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(invoke(main))


class Phases:
    """Wall seconds per phase of a script's run, printed to stderr with ``--timings`` (what the
    bench scripts read to check how each phase grows with the data)."""

    def __init__(self, enabled: bool, started: float | None = None):
        self.enabled, self.seconds = enabled, {}
        if started is not None:  # time spent before main() (imports of the script's own modules)
            self.seconds["start"] = time.perf_counter() - started

    @contextmanager
    def __call__(self, name: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t

    def report(self) -> None:
        if self.enabled:
            print("timings: " + ", ".join(f"{k} {v:.3f} s" for k, v in self.seconds.items()), file=sys.stderr)
