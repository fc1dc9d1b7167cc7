"""Download the upstream project's real annotation exports, checked against pinned hashes.

    uv run scripts/fetch_upstream.py                       # -> data/upstream/
    uv run analysis.py --annotations-root data/upstream/annotations --output-root analysis_upstream

Fetches, from the public LAION emolia-bench repository (MIT licence) at one pinned commit, both
subsets' anonymized ``annotations.csv`` and ``users.csv`` and the dim rubric
``variables.json``, and lays them out as this project reads them:

    <out>/annotations/emolia-emo/{annotations.csv, users.csv}
    <out>/annotations/emolia-dim/{annotations.csv, users.csv}
    <out>/dataset/emolia-dim/variables.json

Each file is fetched from ``<base-url>/<commit>/<path in the upstream repository>`` into a
temporary file beside its destination, its sha256 checked against the hash pinned below, and
only then renamed into place: a hash mismatch, an HTTP error, a dropped connection, a body
larger than the pinned file (counted after any gzip decoding, so a small compressed body that
inflates without end is cut off), a download that outlasts ``--timeout`` (the whole file, from
connecting to the last byte, however slowly the server sends) or a destination that cannot be
written (a file where a folder must be, a full disk) stops the run with exit code 2 and one
line naming the file, leaving the files already fetched intact and nothing half-written. A file
already present with the pinned hash is not fetched again.

Another commit may be fetched with ``--commit SHA --allow-unpinned``: nothing can then be
checked, so the script prints the sha256 of every file it got, for you to pin; each file may then
be at most ``--max-mb`` large.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package, also without an install

from emolia_bench.cli import ArgumentParser, run  # noqa: E402
from emolia_bench.errors import InputError  # noqa: E402

DEFAULT_BASE_URL = "https://raw.githubusercontent.com/LAION-AI/emolia-bench"
# The commit whose published analysis outputs were computed from exactly these files.
PINNED_COMMIT = "70bd74362620a3195f07ace127db399083840cff"
# (path in the upstream repository, path below --out, sha256 and size in bytes at PINNED_COMMIT)
FILES = (
    ("annotations/emolia-emo/annotations.csv", "annotations/emolia-emo/annotations.csv",
     "83a4cd1e46c1610c00fa4408ffa21ad96a8c267d11186d748ca36a7c7488dbf6", 3_907_187),
    ("annotations/emolia-emo/users.csv", "annotations/emolia-emo/users.csv",
     "c4dc92a5f21748c87b4763c9009fa0a87792dce6601abf4fa233e2d2e9454ccf", 590),
    ("annotations/emolia-dim/annotations.csv", "annotations/emolia-dim/annotations.csv",
     "bd73dfee58d124c41735bd912ca16ace6215fdcf5b18aca6de1c2776fe15e194", 1_281_271),
    ("annotations/emolia-dim/users.csv", "annotations/emolia-dim/users.csv",
     "8b345a0a14091f9e7d4d1749f923a2d3cb66ff453ecf1c4c34bcb1d08680a365", 584),
    ("dataset/emolia-dim/variables.json", "dataset/emolia-dim/variables.json",
     "5c5ce926393ebac78308f92744709b1b897aed0bf8b2aa0f2c6818b56e2bc925", 174_593),
)
CHUNK = 1 << 16


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


async def download(session, url: str, target: Path, *, timeout: float, max_bytes: int, progress) -> tuple[str, str]:
    """Stream ``url`` into a temporary file beside ``target``; return (its path, its sha256).
    The caller renames it into place or discards it. Refused (InputError): an HTTP status other
    than 200, a transport error, more than ``max_bytes`` (decoded), more than ``timeout`` seconds
    in all (aiohttp's total timeout), a temporary file that cannot be written."""
    import aiohttp

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as e:
        raise InputError(target.parent, f"cannot be written ({e.strerror or e}); expected a folder for "
                                        f"{target.name}") from None
    h, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as f:
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                    if resp.status != 200:
                        raise InputError(url, f"HTTP {resp.status} {resp.reason}; expected the file {target.name}")
                    bar = progress(total=resp.content_length, desc=target.name)
                    with bar:
                        async for block in resp.content.iter_chunked(CHUNK):
                            size += len(block)
                            if size > max_bytes:
                                raise InputError(url, f"sends more than {max_bytes:,} bytes, more than {target.name} "
                                                      "can hold; nothing written for it")
                            f.write(block)
                            h.update(block)
                            bar.update(len(block))
            except (TimeoutError, aiohttp.ClientError) as e:
                why = f"took longer than --timeout {timeout:g} s" if isinstance(e, TimeoutError) else \
                    f"{type(e).__name__}: {e}"
                raise InputError(url, f"download failed ({why}); nothing written for {target.name}, "
                                      "re-run to try again") from None
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # the temporary file: a full disk, a quota
        Path(tmp).unlink(missing_ok=True)
        raise InputError(target, f"cannot be written ({e.strerror or e}); nothing written for it") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp, h.hexdigest()


def positive_number(text: str) -> float:
    value = float(text)
    if not value > 0:  # also refuses nan
        raise ValueError(text)
    return value


positive_number.__name__ = "positive number"  # argparse's message: "invalid positive number value: '0'"


async def fetch_all(args, base: str, pinned: bool, progress) -> None:
    """Fetch every file not already present with its pinned hash, one after another."""
    import aiohttp

    async with aiohttp.ClientSession(trust_env=True) as session:
        for upstream_path, rel, want, size in FILES:
            target = args.out / rel
            if pinned and target.is_file() and sha256_of(target) == want:
                print(f"{target}: already present, sha256 ok")
                continue
            url = f"{base}/{args.commit}/{upstream_path}"
            tmp, digest = await download(session, url, target, timeout=args.timeout, progress=progress,
                                         max_bytes=size if pinned else int(args.max_mb * 1e6))
            if pinned and digest != want:
                Path(tmp).unlink(missing_ok=True)
                raise InputError(url, f"sha256 {digest} does not match the pinned {want}; the file was "
                                      f"not written (a changed mirror, or a corrupted transfer)")
            os.replace(tmp, target)
            print(f"{target}: fetched, sha256 {'ok' if pinned else digest}")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(__doc__, prog=Path(__file__).name)
    parser.add_argument("--out", type=Path, default=Path("data/upstream"),
                        help="where the files are laid out (default: data/upstream, git-ignored)")
    parser.add_argument("--commit", default=PINNED_COMMIT,
                        help=f"upstream commit to fetch (default: the pinned {PINNED_COMMIT[:12]}…)")
    parser.add_argument("--allow-unpinned", action="store_true",
                        help="allow a --commit other than the pinned one; its files cannot be checked, "
                             "so their sha256 are printed instead")
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL,
                        help=f"where the repository's raw files are served (default: {DEFAULT_BASE_URL}); "
                             "each file is fetched from <base-url>/<commit>/<path>, so a mirror can stand in")
    parser.add_argument("--timeout", type=positive_number, default=120.0,
                        help="the most seconds one file's download may take, from connecting to the last byte "
                             "(default: 120)")
    parser.add_argument("--max-mb", type=positive_number, default=100.0,
                        help="the largest file accepted from an unpinned commit, in MB (default: 100); pinned "
                             "files may be no larger than they are")
    args = parser.parse_args(argv)
    pinned = args.commit == PINNED_COMMIT
    if not pinned and not args.allow_unpinned:
        parser.error(f"--commit {args.commit} is not the pinned commit {PINNED_COMMIT}: its files cannot be "
                     "checked against known hashes; add --allow-unpinned to fetch it anyway")

    from tqdm import tqdm

    def progress(total, desc):
        return tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False,
                    disable=None, file=sys.stderr)  # disable=None: no bar when stderr is not a terminal

    base = args.base_url.rstrip("/")
    if args.out.exists() and not args.out.is_dir():
        raise InputError(args.out, "is not a folder; expected --out to name a folder (or a path to create)")
    for _, rel, _, _ in FILES:  # a destination that is not a file stops the run before anything is fetched
        target = args.out / rel
        if target.exists() and not target.is_file():
            raise InputError(target, "is not a file; expected the place for a downloaded file (remove it, or "
                                     "choose another --out)")
    asyncio.run(fetch_all(args, base, pinned, progress))
    if not pinned:
        print(f"commit {args.commit} is not pinned: nothing was checked; the sha256 of each file are printed above")
    print(f"done: uv run analysis.py --annotations-root {args.out / 'annotations'}")
    return 0


if __name__ == "__main__":
    run(main)
