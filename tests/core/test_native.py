"""Building and loading the C kernels (native.load): the cache, the switch, a failed build."""

import shutil
import stat

import pytest

from retailsim_core import native
from retailsim_core.derived_prices import kernel as price_kernel
from retailsim_core.models.sequence import scan_compiled

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


SOURCE, FLAGS, LINK = KERNELS[0]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
@pytest.mark.parametrize("what", ["folder", "library", "link"])
def test_a_cache_others_can_write_is_not_loaded(monkeypatch, tmp_path, what):
    """Whoever can write the cache could run code in every process: such a cache is refused
    with a warning and the reference path is taken (D84)."""
    cache = tmp_path / "kernels"
    monkeypatch.setenv("RETAILSIM_KERNEL_CACHE", str(cache))
    assert native.load(SOURCE, "compiled_prices", FLAGS, LINK) is not None
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700  # created private
    (built,) = cache.glob("*.so")
    if what == "folder":
        cache.chmod(0o777)
    elif what == "library":
        built.chmod(0o666)
    else:
        planted = tmp_path / "planted.so"
        shutil.move(built, planted)
        built.symlink_to(planted)
    with pytest.warns(UserWarning, match="kernel cache .* (written by others|is a link)"):
        assert native.load(SOURCE, "compiled_prices", FLAGS, LINK) is None
