"""Arrays on disk read through a memory map, so a large training set costs page cache, not
process memory (issue #37, decision D97).

Each array is one safetensors file holding one tensor named ``data``: it can be written in
parts along its first axis (week by week, chunk by chunk) because the header is a fixed
``HEADER_BYTES`` block written last, padded with spaces as the format allows. Reading maps the
file and views it as a read-only ndarray, so every NumPy gather works on it unchanged.

Pages a gather touches count towards the process's resident set until ``release`` drops them
(``MADV_DONTNEED``): they stay in the kernel's page cache, so the next gather of the same rows is
a memory copy, not a disk read, and the cache is reclaimable when memory is short. A reader
that releases after each batch holds one batch, whatever the size of the set.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import struct
import tempfile
import weakref
from pathlib import Path

import numpy as np

PREFIX = "retailsim-mapped-"  # scratch folders: PREFIX<pid>-<random>
HEADER_BYTES = 4096  # the header's u64 length prefix and JSON, padded: data starts here
DTYPES = {
    np.dtype(np.float32): "F32",
    np.dtype(np.float64): "F64",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int16): "I16",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint32): "U32",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}
NUMPY = {name: dtype for dtype, name in DTYPES.items()}


class ArrayWriter:
    """One array appended in parts along axis 0; ``close`` writes its header."""

    def __init__(self, path: Path):
        self.path, self.rows = path, 0
        self.dtype: np.dtype | None = None
        self.tail: tuple[int, ...] | None = None
        self._file = path.open("wb")
        self._file.write(b"\0" * HEADER_BYTES)

    def append(self, part: np.ndarray) -> None:
        part = np.ascontiguousarray(part)
        if self.dtype is None:
            if part.dtype not in DTYPES:
                raise TypeError(f"{self.path.name}: no safetensors dtype for {part.dtype}")
            self.dtype, self.tail = part.dtype, part.shape[1:]
        elif part.dtype != self.dtype or part.shape[1:] != self.tail:
            raise ValueError(
                f"{self.path.name}: a part of {part.dtype}{part.shape[1:]} after "
                f"{self.dtype}{self.tail}"
            )
        if part.size:
            self._file.write(memoryview(part.reshape(-1)).cast("B"))
        self.rows += part.shape[0]

    def close(self) -> None:
        if self.dtype is None:
            raise ValueError(f"{self.path.name}: no part was appended, so its dtype is unknown")
        nbytes = self.rows * int(np.prod(self.tail, dtype=np.int64)) * self.dtype.itemsize
        entry = {"dtype": DTYPES[self.dtype], "shape": [self.rows, *self.tail]}
        header = json.dumps({"data": entry | {"data_offsets": [0, nbytes]}}).encode()
        room = HEADER_BYTES - 8
        if len(header) > room:
            raise ValueError(f"{self.path.name}: header of {len(header)} bytes > {room}")
        self._file.seek(0)
        self._file.write(struct.pack("<Q", room) + header.ljust(room, b" "))
        self._file.close()


def read_mapped(path: Path) -> tuple[np.ndarray, mmap.mmap]:
    """The array of a file written by ``ArrayWriter`` (any one-tensor safetensors file whose data
    starts at ``HEADER_BYTES``), read-only on its map, and the map."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if size != HEADER_BYTES - 8:
            raise ValueError(f"{path}: a header of {size} bytes, not a mapped array file")
        entry = json.loads(f.read(size))["data"]
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    dtype, shape = NUMPY[entry["dtype"]], tuple(entry["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(mapped, dtype=dtype, count=count, offset=HEADER_BYTES)
    return array.reshape(shape), mapped


def _sweep(parent: Path) -> None:
    """Remove the folders that processes no longer running left in ``parent`` (killed mid-write)."""
    for folder in parent.glob(f"{PREFIX}*"):
        pid = folder.name.removeprefix(PREFIX).split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


class MappedArrays:
    """A scratch folder of mapped arrays: ``writer(name)``, its parts appended and closed, then
    ``read(writer)``. Names are made unique, so several sets can share one folder. The folder is
    removed when the object is collected (or at ``cleanup``); arrays already read stay readable,
    their files unlinked but mapped."""

    def __init__(self, parent: Path | None = None):
        parent = Path(parent or tempfile.gettempdir())
        _sweep(parent)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
        self._maps: list[mmap.mmap] = []
        self._names: set[str] = set()
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, True)

    def writer(self, name: str) -> ArrayWriter:
        unique = next(
            f"{name}.{i}" for i in range(len(self._names) + 1) if f"{name}.{i}" not in self._names
        )
        self._names.add(unique)
        return ArrayWriter(self.folder / f"{unique}.safetensors")

    def subfolder(self, name: str) -> Path:
        """A new, empty folder in the scratch folder, for files other than arrays (the trip
        store's parts), removed with it."""
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.folder))

    def read(self, writer: ArrayWriter) -> np.ndarray:
        """The closed ``writer``'s array, mapped."""
        array, mapped = read_mapped(writer.path)
        writer.path.unlink()  # the map keeps the data; nothing is left behind if we die
        self._maps.append(mapped)
        return array

    def put(self, name: str, array: np.ndarray) -> np.ndarray:
        """``array`` written whole and read back mapped."""
        writer = self.writer(name)
        writer.append(array)
        writer.close()
        return self.read(writer)

    def release(self) -> None:
        """Drop every mapped page from this process's resident set (the page cache keeps them)."""
        for mapped in self._maps:
            mapped.madvise(mmap.MADV_DONTNEED)

    def cleanup(self) -> None:
        self._finalizer()


class ChunkedArrays:
    """Named arrays appended chunk by chunk: concatenated in memory, or written to ``mapped``
    as they come (one chunk in memory at a time) and read back mapped."""

    def __init__(self, mapped: MappedArrays | None):
        self.mapped, self.parts, self.writers = mapped, {}, {}

    def append(self, chunk: dict[str, np.ndarray]) -> None:
        for name, array in chunk.items():
            if self.mapped is None:
                self.parts.setdefault(name, []).append(array)
            else:
                if name not in self.writers:
                    self.writers[name] = self.mapped.writer(name)
                self.writers[name].append(array)

    def finish(self) -> dict[str, np.ndarray]:
        if self.mapped is None:
            return {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in self.parts.items()}
        for writer in self.writers.values():
            writer.close()
        return {name: self.mapped.read(w) for name, w in self.writers.items()}

    def put(self, name: str, array: np.ndarray) -> np.ndarray:
        return array if self.mapped is None else self.mapped.put(name, array)
