"""Clip checks: the batched check (one folder listing per folder) gives, clip for clip, the
answer of the one-clip check (two system calls per clip), on every kind of entry."""

import os

import pytest

from emolia_bench.paths import clip_problem, clip_problems


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")
def test_batched_clip_check_agrees_with_the_one_clip_check(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    (root / "locked").mkdir()
    outside.mkdir()
    (outside / "x.mp3").write_bytes(b"x")
    (root / "a" / "ok.mp3").write_bytes(b"ok")
    (root / "top.mp3").write_bytes(b"top")
    os.mkfifo(root / "a" / "fifo.mp3")
    (root / "a" / "dir.mp3").mkdir()
    (root / "a" / "in_link.mp3").symlink_to(root / "a" / "ok.mp3")  # a link staying inside: readable
    (root / "a" / "out_link.mp3").symlink_to(outside / "x.mp3")  # a link leading out: refused
    (root / "a" / "dangling.mp3").symlink_to(root / "a" / "gone.mp3")
    (root / "escape").symlink_to(outside, target_is_directory=True)  # a folder leading out
    (root / "inner").symlink_to(root / "a", target_is_directory=True)  # a folder link staying inside
    (root / "locked" / "l.mp3").write_bytes(b"l")
    rels = ["a/ok.mp3", "top.mp3", "./a//ok.mp3", "a/missing.mp3", "nofolder/x.mp3", "a/fifo.mp3", "a/dir.mp3",
            "a/in_link.mp3", "a/out_link.mp3", "a/dangling.mp3", "escape/x.mp3", "inner/ok.mp3", "inner/fifo.mp3",
            "../outside/x.mp3", "/etc/passwd", "", "a\\ok.mp3", "a/\x00.mp3", "locked/l.mp3", "top.mp3/x"]
    os.chmod(root / "locked", 0o300)  # not listable (as root, it still is: either way the answers must agree)
    try:
        got = clip_problems(root, rels)
        want = {rel: clip_problem(root, rel) for rel in rels}
    finally:
        os.chmod(root / "locked", 0o700)
    assert got == want
    # and the answers are the expected kinds, so the comparison is not between two wrong checks
    assert got["a/ok.mp3"] is None and got["top.mp3"] is None and got["inner/ok.mp3"] is None
    assert got["a/in_link.mp3"] is None
    assert got["a/missing.mp3"].startswith("audio_unreadable: No such file")
    for rel in ("a/fifo.mp3", "a/dir.mp3", "a/out_link.mp3", "escape/x.mp3", "../outside/x.mp3", "/etc/passwd", ""):
        assert got[rel].startswith("audio_refused"), rel
