"""Independent jobs — one per subset — side by side in forked processes, results in job order.

The subsets of a stage share nothing, so where the platform forks (Linux), there are cores to
spare and the caller says the jobs are big enough to pay for a process each, :func:`forked_map`
runs the first job in this process and each other job in a forked child at the same time. A
child inherits the parent's memory (the loaded frames are neither copied nor sent), computes its
job and sends the result back pickled through a pipe.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable

#: annotation rows from which analysis.py runs its subsets side by side. Measured on 2 cores:
#: at 1× (57k rows) a process each gained nothing (analyse phase 0.63 s → 0.52–0.63 s) and, with
#: the drawing process as a third, made the default run slower; at 10× (573k) --no-figures
#: 9.6–10.2 s → 7.7–8.2 s.
SIDE_BY_SIDE_ROWS = 200_000

#: how many jobs this process's work shares the cores with (1 outside :func:`forked_map`);
#: ``resampling.threads`` divides the cores by it, so jobs side by side do not oversubscribe them
SHARING = 1


def cores() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _outcome(function: Callable[[int], object], i: int) -> tuple[bool, object]:
    try:
        return True, function(i)
    except Exception as e:  # noqa: BLE001 - handed to the caller, which raises it in job order
        return False, e


def _child(function: Callable[[int], object], i: int, pipe: int) -> None:
    """Run job ``i`` and write its pickled outcome to ``pipe``; never returns. It ends with
    ``os._exit``: the parent's exit handlers (its helper processes, its files) are the parent's."""
    code = 0
    try:
        ok, value = _outcome(function, i)
        try:
            payload = pickle.dumps((ok, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - an unpicklable answer: send what it said
            payload = pickle.dumps((False, RuntimeError(f"{type(value).__name__}: {value} ({e})")))
        with os.fdopen(pipe, "wb") as f:
            f.write(payload)
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not go on into the parent's code
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def forked_map(function: Callable[[int], object], n: int, fork: bool = True) -> list:
    """``[function(0), …, function(n - 1)]``. With ``fork`` (and where the platform forks and this
    process may use ≥ 2 cores), job 0 runs here while each other job runs in a forked child;
    otherwise the jobs run one after another here. Either way the first failing job's exception,
    in job order, is raised here, as if the jobs had run in turn; a child that ends without an
    answer raises RuntimeError."""
    global SHARING
    if not fork or n < 2 or not hasattr(os, "fork") or sys.platform != "linux" or cores() < 2:
        return [function(i) for i in range(n)]
    previous, SHARING = SHARING, min(n, cores())
    children: list[tuple[int, int]] = []
    outcomes = []
    try:
        for i in range(1, n):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                _child(function, i, write)
            os.close(write)
            children.append((pid, read))
        outcomes.append(_outcome(function, 0))
        while children:
            pid, read = children[0]
            with os.fdopen(read, "rb") as f:
                data = f.read()
            os.waitpid(pid, 0)
            children.pop(0)
            outcomes.append(pickle.loads(data) if data else
                            (False, RuntimeError(f"the process working on job {len(outcomes)} ended without an answer")))
    finally:
        SHARING = previous
        for pid, read in children:  # interrupted: the children still working are not needed
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
    results = []
    for ok, value in outcomes:
        if not ok:
            raise value
        results.append(value)
    return results
