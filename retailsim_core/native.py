"""Plain-C kernels built on first use and loaded with ctypes (D46, D50).

A kernel is one C source file next to the Python module that wraps it. It is compiled with the
system C compiler (``cc``, or ``$CC``) into a per-user cache keyed by the source, the flags and
the CPU (``-march=native``), written by atomic rename so concurrent builders are harmless, and
loaded with ctypes: no torch or Python headers, no pickled or downloaded binary.

Loading a library runs its code, so the cache is trusted only as far as nobody else can write
it (D84): the folder is created private (0700), and a cached library is loaded only when it and
its folder are owned by this user, are not links, and neither group nor others may write them.
A cache that fails this is not used (a warning names the folder and why); the caller takes the
reference path. Every kernel is
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
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Mapping
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


def _unsafe(path: Path) -> str | None:
    """Why ``path`` (the cache folder or a library in it) is not trusted, or None."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "is a link"
    if info.st_uid != os.getuid():
        return f"belongs to user {info.st_uid}, not to this user ({os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"may be written by others (mode {stat.filemode(info.st_mode)})"
    return None


class UntrustedCache(OSError):
    """The kernel cache, or a library in it, could have been written by someone else."""


def _trusted(path: Path) -> Path:
    reason = _unsafe(path)
    if reason:
        raise UntrustedCache(f"kernel cache {path} {reason}; not loaded (D84)")
    return path


def _build(
    compiler: str, source: Path, compile_flags: tuple[str, ...], link_flags: tuple[str, ...]
) -> Path:
    key = hashlib.sha256(
        source.read_bytes()
        + repr((compiler, compile_flags, link_flags)).encode()
        + _cpu_signature().encode()
    ).hexdigest()[:16]
    folder = cache_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _trusted(folder)
    target = folder / f"{source.stem}-{key}.so"
    if target.exists() or target.is_symlink():
        return _trusted(target)
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
        lib.chmod(0o700)
        os.replace(lib, target)
    return _trusted(target)


def load(
    source: Path,
    switch: str,
    compile_flags: tuple[str, ...],
    link_flags: tuple[str, ...],
    signatures: Mapping[str, tuple[list, type | None]] | None = None,
) -> ctypes.CDLL | None:
    """The built library (callers cache it), or None when the setting ``switch`` (a field of
    :class:`~retailsim_core.settings.Settings`) is off, there is no compiler or the build fails.
    ``signatures``: function name -> (argument types, result type) to declare on it.
    """
    if not getattr(load_settings(), switch):
        return None
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    try:
        lib = ctypes.CDLL(str(_build(compiler, source, compile_flags, link_flags)))
        for name, (argtypes, restype) in (signatures or {}).items():
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, restype
        return lib
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        warnings.warn(
            f"{source.name} unavailable, using the reference path: {err} {detail.decode()[:500]}",
            stacklevel=2,
        )
        return None
