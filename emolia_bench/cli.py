"""The one place where errors become exit codes, shared by every top-level script."""

from __future__ import annotations

import sys
from collections.abc import Callable

from .errors import InputError

EXIT_OK = 0
EXIT_PARTIAL = 1  # benchmark: outputs written, but some rows could not be scored
EXIT_BAD_INPUT = 2


def run(main: Callable[[], int | None]) -> None:
    """Run ``main`` and exit: 2 with one line on stderr for bad input, 130 on Ctrl-C."""
    try:
        code = main()
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        print("interrupted; previous outputs are left as they were", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or EXIT_OK)
