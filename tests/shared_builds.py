"""Session fixtures' folders built once per test session, whichever xdist worker asks first."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder ``build`` fills once per test session, by whichever xdist worker asks first
    (the others wait on a file lock); each worker gets its own copy, so what one worker's tests
    write never reaches another's. Saves each extra worker the build's seconds of CPU."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above the workers' own
    shared = root / f"built_{name}"
    with FileLock(f"{shared}.lock"):
        if not (shared / ".built").exists():
            shutil.rmtree(shared, ignore_errors=True)  # a build that failed midway
            build(shared)
            (shared / ".built").touch()
    mine = tmp_path_factory.mktemp(name)
    shutil.copytree(shared, mine, dirs_exist_ok=True)  # copy2: modification times kept
    return mine
