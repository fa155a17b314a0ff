"""Plain-C kernels built on first use and loaded with ctypes (D46, D50).

A kernel is one C source file next to the Python module that wraps it. It is compiled with the
system C compiler (``cc``, or ``$CC``) into a per-user cache keyed by the source, the flags and
the CPU (``-march=native``), written by atomic rename so concurrent builders are harmless, and
loaded with ctypes: no torch or Python headers, no pickled or downloaded binary. Every kernel is
a feature: when there is no compiler, the build fails (a warning says why) or its environment
switch is ``0``, :func:`load` returns None and the caller uses its NumPy/PyTorch path, which
stays the tested reference.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

from retailsim_core.settings import load_settings


def _cpu_signature() -> str:
    try:
        flags = next(
            line
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        flags = ""
    return platform.machine() + flags


def cache_dir() -> Path:
    return load_settings().kernel_folder


def _build(
    compiler: str, source: Path, compile_flags: tuple[str, ...], link_flags: tuple[str, ...]
) -> Path:
    key = hashlib.sha256(
        source.read_bytes()
        + repr((compiler, compile_flags, link_flags)).encode()
        + _cpu_signature().encode()
    ).hexdigest()[:16]
    target = cache_dir() / f"{source.stem}-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        obj, lib = Path(tmp) / "kernel.o", Path(tmp) / "kernel.so"
        subprocess.run(
            [compiler, *compile_flags, "-c", str(source), "-o", str(obj)],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [compiler, str(obj), *link_flags, "-o", str(lib)], check=True, capture_output=True
        )
        os.replace(lib, target)
    return target


def load(
    source: Path, switch: str, compile_flags: tuple[str, ...], link_flags: tuple[str, ...]
) -> ctypes.CDLL | None:
    """The built library (callers cache it), or None when the setting ``switch`` (a field of
    :class:`~retailsim_core.settings.Settings`) is off, there is no compiler or the build fails.
    """
    if not getattr(load_settings(), switch):
        return None
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    try:
        return ctypes.CDLL(str(_build(compiler, source, compile_flags, link_flags)))
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        warnings.warn(
            f"{source.name} unavailable, using the reference path: {err} {detail.decode()[:500]}",
            stacklevel=2,
        )
        return None
