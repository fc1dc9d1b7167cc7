"""Clip paths sent by clients: resolved inside the dataset root, or refused.

Shared by both servers (sham_server, clap_server) and every scorer: a clip is named relative to
the dataset root, and nothing outside that root — through ``..``, an absolute path or a symlink —
may be opened or even tested for existence; only regular files are read (a FIFO would block the
reader forever, a device never ends).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class PathRefused(ValueError):
    pass


def resolve_inside(root: Path, rel: str) -> Path:
    """``root/rel`` if it stays inside ``root`` after resolving ``..`` and symlinks."""
    return Path(_resolve_inside(os.fspath(root), rel))


def _split(rel: str) -> tuple[list[str], str]:
    """``rel``'s folders and file name, or :class:`PathRefused`."""
    # plain string work: every clip of a run passes here (pathlib's parsing cost 3x as much)
    if not rel or "\x00" in rel or "\\" in rel:
        raise PathRefused("audio_path is empty or contains a forbidden character")
    parts = [p for p in rel.split("/") if p not in ("", ".")]  # as PurePosixPath splits it
    if rel.startswith("/") or ".." in parts or not parts:
        raise PathRefused("audio_path must be relative to the dataset root, without '..'")
    *folders, name = parts
    return folders, name


def _inside(real: str, real_root: str) -> bool:
    # both sides are normalised real paths, so "inside" is a prefix test on whole components
    # (os.path.commonpath says the same at ~10x the cost)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _resolve_inside(root: str, rel: str) -> str:
    folders, name = _split(rel)
    real_root = _real_folder(root)
    real = os.path.join(_real_folder(os.path.join(real_root, *folders)), name)
    if _is_link(real):  # the clip itself is always resolved afresh
        real = os.path.realpath(real)
    if not _inside(real, real_root):
        raise PathRefused("audio_path escapes the dataset root")
    return real


def _is_link(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _real_folder(path: str) -> str:
    """``os.path.realpath`` of a folder, resolved on every call: a folder swapped for a symlink
    is noticed at once, and a relative path means the working folder of the call."""
    return os.path.realpath(path)


def clip_problem(root: Path, rel: str) -> str | None:
    """Why the clip ``rel`` may not be read (``audio_refused: …``, ``audio_unreadable: …``), or
    None when it is a regular file inside ``root``."""
    try:
        real = _resolve_inside(os.fspath(root), rel)
        mode = os.stat(real).st_mode
    except PathRefused as e:
        return f"audio_refused: {e}"
    except OSError as e:
        return f"audio_unreadable: {e.strerror or type(e).__name__}"
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"
        return f"audio_refused: {kind}, not a regular file"
    return None


def clip_problems(root: Path, rels) -> dict[str, str | None]:
    """:func:`clip_problem` of every clip in ``rels``, the same answers, with one listing per
    folder instead of two system calls per clip: a clip its folder lists as a regular file (not
    a link) in a folder inside the root is readable; a name the folder does not list is missing;
    anything else (a link, a FIFO, an unlistable folder) goes through :func:`clip_problem`.
    (A benchmark checks every clip before scoring, tens of thousands of them.)"""
    root = os.fspath(root)
    out: dict[str, str | None] = {}
    by_folder: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for rel in rels:
        try:
            folders, name = _split(rel)
        except PathRefused as e:
            out[rel] = f"audio_refused: {e}"
            continue
        by_folder.setdefault(tuple(folders), []).append((rel, name))
    real_root = _real_folder(root)
    for folders, clips in by_folder.items():
        folder = _real_folder(os.path.join(real_root, *folders))
        listed = None
        if _inside(folder, real_root):
            try:
                with os.scandir(folder) as entries:
                    listed = {e.name: e for e in entries}
            except OSError:
                pass
        for rel, name in clips:
            entry = None if listed is None else listed.get(name)
            if listed is not None and entry is None:
                out[rel] = f"audio_unreadable: {os.strerror(errno.ENOENT)}"
            elif entry is not None and entry.is_file(follow_symlinks=False):
                out[rel] = None
            else:
                out[rel] = clip_problem(Path(root), rel)
    return out


class ClipRefused(OSError):
    """A clip that may not be read; ``str()`` is the row's error text."""


def read_clip(root: Path, rel: str) -> bytes:
    """The bytes of the regular file ``rel`` inside ``root``, or :class:`ClipRefused`. Opened
    without blocking and without following a last-moment symlink, then checked again on the open
    file, so a clip swapped for a FIFO or a link after :func:`clip_problem` still never hangs or
    leaks."""
    try:
        real = resolve_inside(root, rel)
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except PathRefused as e:
        raise ClipRefused(f"audio_refused: {e}") from None
    except OSError as e:
        raise ClipRefused(f"audio_unreadable: {e.strerror or type(e).__name__}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ClipRefused("audio_refused: not a regular file")
        return f.read()
