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
only then renamed into place: a hash mismatch, an HTTP error or a dropped connection stops the
run with exit code 2 and one line naming the file, leaving the files already fetched intact
and nothing half-written. A file already present with the pinned hash is not fetched again.

Another commit may be fetched with ``--commit SHA --allow-unpinned``: nothing can then be
checked, so the script prints the sha256 of every file it got, for you to pin.
"""

from __future__ import annotations

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
# (path in the upstream repository, path below --out, sha256 at PINNED_COMMIT)
FILES = (
    ("annotations/emolia-emo/annotations.csv", "annotations/emolia-emo/annotations.csv",
     "83a4cd1e46c1610c00fa4408ffa21ad96a8c267d11186d748ca36a7c7488dbf6"),
    ("annotations/emolia-emo/users.csv", "annotations/emolia-emo/users.csv",
     "c4dc92a5f21748c87b4763c9009fa0a87792dce6601abf4fa233e2d2e9454ccf"),
    ("annotations/emolia-dim/annotations.csv", "annotations/emolia-dim/annotations.csv",
     "bd73dfee58d124c41735bd912ca16ace6215fdcf5b18aca6de1c2776fe15e194"),
    ("annotations/emolia-dim/users.csv", "annotations/emolia-dim/users.csv",
     "8b345a0a14091f9e7d4d1749f923a2d3cb66ff453ecf1c4c34bcb1d08680a365"),
    ("dataset/emolia-dim/variables.json", "dataset/emolia-dim/variables.json",
     "5c5ce926393ebac78308f92744709b1b897aed0bf8b2aa0f2c6818b56e2bc925"),
)
CHUNK = 1 << 16


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def download(session, url: str, target: Path, timeout: float, progress) -> tuple[str, str]:
    """Stream ``url`` into a temporary file beside ``target``; return (its path, its sha256).
    The caller renames it into place or discards it."""
    import requests

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as f:
            try:
                with session.get(url, stream=True, timeout=timeout) as resp:
                    if resp.status_code != 200:
                        raise InputError(url, f"HTTP {resp.status_code} {resp.reason}; expected the file {target.name}")
                    total = resp.headers.get("Content-Length")
                    bar = progress(total=int(total) if total and total.isdigit() else None, desc=target.name)
                    with bar:
                        for block in resp.iter_content(CHUNK):
                            f.write(block)
                            h.update(block)
                            bar.update(len(block))
            except requests.RequestException as e:
                raise InputError(url, f"download failed ({type(e).__name__}: {e}); nothing written for "
                                      f"{target.name}, re-run to try again") from None
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp, h.hexdigest()


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
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the server to connect or send (default: 60)")
    args = parser.parse_args(argv)
    pinned = args.commit == PINNED_COMMIT
    if not pinned and not args.allow_unpinned:
        parser.error(f"--commit {args.commit} is not the pinned commit {PINNED_COMMIT}: its files cannot be "
                     "checked against known hashes; add --allow-unpinned to fetch it anyway")

    import requests
    from tqdm import tqdm

    def progress(total, desc):
        return tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False,
                    disable=None, file=sys.stderr)  # disable=None: no bar when stderr is not a terminal

    base = args.base_url.rstrip("/")
    got = []
    with requests.Session() as session:
        for upstream_path, rel, want in FILES:
            target = args.out / rel
            if pinned and target.is_file() and sha256_of(target) == want:
                print(f"{target}: already present, sha256 ok")
                continue
            url = f"{base}/{args.commit}/{upstream_path}"
            tmp, digest = download(session, url, target, args.timeout, progress)
            if pinned and digest != want:
                Path(tmp).unlink(missing_ok=True)
                raise InputError(url, f"sha256 {digest} does not match the pinned {want}; the file was "
                                      f"not written (a changed mirror, or a corrupted transfer)")
            os.replace(tmp, target)
            got.append((target, digest))
            print(f"{target}: fetched, sha256 {'ok' if pinned else digest}")
    if not pinned:
        print(f"commit {args.commit} is not pinned: nothing was checked; the sha256 of each file are printed above")
    print(f"done: uv run analysis.py --annotations-root {args.out / 'annotations'}")
    return 0


if __name__ == "__main__":
    run(main)
