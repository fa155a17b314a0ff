"""Append-only, vectorised bookkeeping for per-entity NumPy arrays.

- :class:`KeyIndex` gives int64 keys dense ids in order of arrival (lookups by binary search
  over a sorted copy, so a batch of K keys costs O(K log N), extension O(N) memory moves);
- :class:`Growable` holds named arrays that share one length and grow by reallocation with
  spare capacity, so appending a few entities a week does not copy every array every week.
"""

from __future__ import annotations

import numpy as np


class KeyIndex:
    """Dense ids 0..size-1 for int64 keys, in order of first arrival."""

    def __init__(self) -> None:
        self._keys = np.empty(0, np.int64)  # sorted
        self._ids = np.empty(0, np.int64)  # id of each sorted key
        self.size = 0

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Ids of ``keys``; -1 where a key is unknown."""
        keys = np.asarray(keys, np.int64)
        if self.size == 0:
            return np.full(keys.shape, -1, np.int64)
        pos = np.minimum(np.searchsorted(self._keys, keys), self.size - 1)
        return np.where(self._keys[pos] == keys, self._ids[pos], -1)

    def ids(self, keys: np.ndarray) -> np.ndarray:
        """Ids of ``keys``, giving unknown ones new ids in order of their first occurrence."""
        keys = np.asarray(keys, np.int64)
        out = self.lookup(keys)
        missing = out < 0
        if missing.any():
            unique, first = np.unique(keys[missing], return_index=True)
            self.add(unique[np.argsort(first, kind="stable")])
            out[missing] = self.lookup(keys[missing])
        return out

    def add(self, keys: np.ndarray) -> None:
        """Append new, distinct keys; their ids follow in the given order."""
        keys = np.asarray(keys, np.int64)
        if keys.size == 0:
            return
        order = np.argsort(keys, kind="stable")
        sorted_new = keys[order]
        if (sorted_new[1:] == sorted_new[:-1]).any() or (self.lookup(sorted_new) >= 0).any():
            raise ValueError("KeyIndex.add: keys must be new and distinct")
        at = np.searchsorted(self._keys, sorted_new)
        self._keys = np.insert(self._keys, at, sorted_new)
        self._ids = np.insert(self._ids, at, self.size + order)
        self.size += keys.size


class Growable:
    """Named arrays sharing one length along their last axis; ``arrays[name][..., :size]`` is
    live.
    """

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._spec: dict[str, tuple[np.dtype, object, int | None]] = {}
        self.size = 0
        self.capacity = 0

    def declare(self, name: str, dtype, fill, rows: int | None = None) -> None:
        self._spec[name] = (np.dtype(dtype), fill, rows)
        self.arrays[name] = self._alloc(name, self.capacity)

    def _alloc(self, name: str, capacity: int) -> np.ndarray:
        # Uninitialised: grow() fills entries as they become live, so spare capacity is never
        # written (its pages are not even touched).
        dtype, _, rows = self._spec[name]
        return np.empty(capacity if rows is None else (rows, capacity), dtype)

    def grow(self, k: int) -> int:
        """Extend by ``k`` entries (filled with each array's fill value); returns the old size."""
        old = self.size
        if old + k > self.capacity:
            capacity = max(old + k, int(self.capacity * 1.5), 1024)
            for name, arr in self.arrays.items():
                bigger = self._alloc(name, capacity)
                bigger[..., :old] = arr[..., :old]
                self.arrays[name] = bigger
            self.capacity = capacity
        for name, arr in self.arrays.items():
            arr[..., old : old + k] = self._spec[name][1]
        self.size = old + k
        return old

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name][..., : self.size]
