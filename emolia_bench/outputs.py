"""Writing outputs: strict JSON, CSV bytes exactly as pandas writes them, and atomic sets.

Every output of a run is computed in full first, then :func:`write_outputs` stages each file
beside its target (fsynced) and renames them into place only when all are on disk: a failed
run leaves the previous outputs as they were.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError


def to_jsonable(obj):
    """numpy/pandas scalars -> Python; NaN/inf -> None (strict JSON)."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if obj is None or obj is pd.NA or obj is pd.NaT:
        return None
    return obj


def json_bytes(obj) -> bytes:
    return (json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def csv_bytes(df: pd.DataFrame) -> bytes:
    """A frame as CSV, UTF-8, pandas' own writer: no index, ``\n`` line ends (what upstream writes)."""
    return df.to_csv(index=False, lineterminator="\n").encode("utf-8")


def _stage(target: Path, data: bytes) -> str:
    """Write ``data`` to a fsynced temporary file beside ``target``; return its path."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates the file 0600; an output gets the permissions any new file of the user
        # gets (0666 less the umask), as a plain open() would have given it
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _umask() -> int:
    """The process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


@contextmanager
def folder_lock(folder: Path):
    """Hold an exclusive advisory lock (``flock``) on ``folder`` itself while writing into it:
    a second run writing the same outputs waits (saying so on stderr) instead of interleaving
    its files with ours or sweeping away our staged ones. No lock file is left behind."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no advisory locks
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting: another run is writing to {folder}", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _check_slots(root: Path, files: Mapping[str, bytes]) -> None:
    """Every output slot must be free or hold a regular file: a folder (or a device, a FIFO…)
    where a file must go is bad input, found before anything is written."""
    for rel in files:
        target = Path(root) / rel
        if os.path.lexists(target) and not target.is_file():
            kind = "a folder" if target.is_dir() else "not a regular file"
            raise InputError(target, f"is {kind} where an output file must go; move it away and re-run")
        for parent in target.parents:
            if parent == Path(root).parent:
                break
            if os.path.lexists(parent) and not parent.is_dir():
                raise InputError(parent, "is a file where an output folder must go; move it away and re-run")


def _backup(target: Path) -> str | None:
    """A hard link to ``target``'s current file (so it can be put back), or None if none."""
    if not os.path.lexists(target):
        return None
    backup = f"{target.parent}/.{target.name}.{os.getpid()}.{os.urandom(4).hex()}.bak"
    try:
        os.link(target, backup)
    except OSError:  # a file system without hard links: a copy
        shutil.copy2(target, backup)
    return backup


def write_outputs(root: Path, files: Mapping[str, bytes]) -> None:
    """Write a set of outputs computed in full beforehand: all or nothing, as far as a file
    system allows.

    Every slot is checked first (a folder where a file must go: bad input, nothing written).
    Then, holding the output folder's lock (:func:`folder_lock`), every file is written to a
    temporary file beside its target and fsynced; only when all of them are on disk are they
    renamed into place. A failure while staging leaves every previous output untouched; a
    rename that still fails midway puts back the files already replaced (each kept as a hard
    link until the set is complete). Temporary files a killed earlier run left next to these
    outputs are removed first — under the lock, so never another live run's.
    """
    root = Path(root)
    _check_slots(root, files)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(root, f"cannot create the output folder ({e.strerror or type(e).__name__})") from None
    with folder_lock(root):
        staged: list[tuple[str, Path]] = []
        replaced: list[tuple[Path, str | None]] = []
        try:
            for rel, data in files.items():
                target = root / rel
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    for pattern in (".tmp", ".bak"):
                        for stale in target.parent.glob(f".{glob_escape(target.name)}.*{pattern}"):
                            stale.unlink(missing_ok=True)
                    staged.append((_stage(target, data), target))
                except OSError as e:
                    raise InputError(target, f"cannot write output ({e.strerror or type(e).__name__}); "
                                             "expected a writable output folder with free space") from None
            backup = None
            try:
                for tmp, target in staged:
                    backup = _backup(target)
                    os.replace(tmp, target)
                    replaced.append((target, backup))
                    backup = None
            except OSError as e:
                if backup is not None:  # the failed target was never replaced: its backup goes
                    _discard(backup)
                for done, backup in reversed(replaced):
                    if backup is None:
                        done.unlink(missing_ok=True)
                    else:
                        os.replace(backup, done)
                replaced = []
                raise InputError(target, f"cannot replace output ({e.strerror or type(e).__name__}); "
                                         "the outputs replaced before it were restored") from None
            staged = []
        finally:
            for tmp, _ in staged:
                _discard(tmp)
            for _, backup in replaced:
                if backup is not None:
                    _discard(backup)


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)
