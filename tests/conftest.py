"""Shared paths and helpers for the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
WORKED = SHARED / "worked-example"
REAL = SHARED / "real"

EMO_HEADER = "annotation_id,username,source_emotion,queried_emotion,task_type,file_name,rating,reaction_time_ms,sample_time_ms,created_at\n"
DIM_HEADER = "annotation_id,username,dimension,level,polarity,file_name,rating,reaction_time_ms,sample_time_ms,created_at\n"
USERS_HEADER = "username,is_active,is_admin,onboarded,annotation_count,created_at,age,languages,gender,consent,degree,expertise,listening_setup\n"


def user_row(name: str) -> str:
    return f'{name},1,0,True,0,2026-03-30T16:54:45.577Z,30,"English,German",Female,True,MSc,3,External speakers\n'


def run_script(script: str, *args, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run one of the top-level scripts the way a user does, capturing its output."""
    return subprocess.run([sys.executable, str(REPO / script), *map(str, args)], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=timeout)


def needs(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not present")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below root with its bytes: to prove a failed run changed nothing."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
