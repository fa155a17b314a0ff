"""Mapped arrays: written in parts, read back equal, valid safetensors, releasable."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file

from retailsim_core.storage.mapped import DTYPES, MappedArrays


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 7), min_size=1, max_size=4),
    tail=st.sampled_from([(), (3,), (2, 2)]),
    dtype=st.sampled_from(sorted(DTYPES, key=str)),
)
def test_parts_read_back_as_one_safetensors_array(sizes, tail, dtype):
    rng = np.random.default_rng(sum(sizes))
    parts = [(rng.random((n, *tail)) * 100).astype(dtype) for n in sizes]
    mapped = MappedArrays()
    writer = mapped.writer("x")
    for part in parts:
        writer.append(part)
    writer.close()
    whole = np.concatenate(parts)
    np.testing.assert_array_equal(load_file(str(writer.path))["data"], whole)  # the format
    array = mapped.read(writer)
    assert not writer.path.exists()  # unlinked once mapped: a killed run leaves nothing
    np.testing.assert_array_equal(array, whole)
    assert array.dtype == whole.dtype and not array.flags.writeable
    mapped.release()  # pages leave the resident set; the values stay readable
    np.testing.assert_array_equal(array[::-1], whole[::-1])
    mapped.cleanup()
    assert not mapped.folder.exists()
    np.testing.assert_array_equal(array, whole)  # unlinked, still mapped


def test_names_are_unique_and_bad_parts_are_refused():
    mapped = MappedArrays()
    a, b = mapped.put("x", np.arange(3)), mapped.put("x", np.arange(5))
    assert len(a) == 3 and len(b) == 5
    writer = mapped.writer("y")
    writer.append(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="after float32"):
        writer.append(np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="no safetensors dtype"):
        mapped.writer("z").append(np.array(["a"]))
    with pytest.raises(ValueError, match="no part"):
        mapped.writer("w").close()


def test_folders_of_dead_processes_are_swept(tmp_path):
    dead = tmp_path / "retailsim-mapped-999999999-x"  # no such pid
    live = tmp_path / f"retailsim-mapped-{os.getpid()}-y"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "a.safetensors").write_bytes(b"")
    mapped = MappedArrays(tmp_path)
    assert not dead.exists() and live.exists() and mapped.folder.parent == tmp_path
