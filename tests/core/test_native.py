"""Building and loading the C kernels (native.load): the cache, the switch, a failed build."""

import shutil

import pytest

from retailsim_core import native
from retailsim_core.models import scan_compiled
from retailsim_core.prices import kernel as price_kernel

KERNELS = [
    (price_kernel.SOURCE, price_kernel.COMPILE_FLAGS, price_kernel.LINK_FLAGS),
    (scan_compiled.SOURCE, scan_compiled.COMPILE_FLAGS, scan_compiled.LINK_FLAGS),
]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
@pytest.mark.parametrize("source,compile_flags,link_flags", KERNELS)
def test_builds_once_into_the_cache(monkeypatch, tmp_path, source, compile_flags, link_flags):
    monkeypatch.setenv("RETAILSIM_KERNEL_CACHE", str(tmp_path))
    assert native.load(source, "compiled_prices", compile_flags, link_flags) is not None
    built = list(tmp_path.glob(f"{source.stem}-*.so"))
    assert len(built) == 1
    mtime = built[0].stat().st_mtime_ns
    assert native.load(source, "compiled_prices", compile_flags, link_flags) is not None
    assert (
        built[0].stat().st_mtime_ns == mtime and list(tmp_path.iterdir()) == built
    )  # reused, no leftovers


@pytest.mark.parametrize("source,compile_flags,link_flags", KERNELS)
def test_the_switch_or_a_failed_build_gives_none(
    monkeypatch, tmp_path, source, compile_flags, link_flags
):
    monkeypatch.setenv("RETAILSIM_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("RETAILSIM_COMPILED_PRICES", "0")
    assert native.load(source, "compiled_prices", compile_flags, link_flags) is None
    monkeypatch.setenv("RETAILSIM_COMPILED_PRICES", "1")
    monkeypatch.setenv("CC", shutil.which("false") or "/bin/false")
    with pytest.warns(UserWarning, match=f"{source.name} unavailable"):
        assert native.load(source, "compiled_prices", compile_flags, link_flags) is None
    assert not list(tmp_path.glob("*.so"))
