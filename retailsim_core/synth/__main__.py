"""``retailsim-generate``: write a synthetic LGSR dataset and its ground truth."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from retailsim_core.synth.config import PRESETS, preset
from retailsim_core.synth.writer import generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="retailsim-generate", description=__doc__)
    ap.add_argument("--preset", default="default", choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=None, help="overrides the preset's seed")
    ap.add_argument("--raw-dir", type=Path, default=Path("data/raw"))
    ap.add_argument("--truth-dir", type=Path, default=Path("data/ground_truth"))
    ap.add_argument(
        "--header",
        choices=["full", "sample"],
        default="full",
        help="'sample' writes the public 5,000-customer sample's seg_1/seg_2 header",
    )
    ap.add_argument("--gzip", action="store_true", help="write transactions_YYYYWW.csv.gz")
    ap.add_argument(
        "--missing-weeks", default="", help="comma-separated weeks (1..117) to leave out"
    )
    ap.add_argument(
        "--if-absent", action="store_true", help="do nothing if raw-dir already has week files"
    )
    args = ap.parse_args(argv)
    if args.if_absent and args.raw_dir.exists() and any(args.raw_dir.glob("transactions_*.csv*")):
        print(f"{args.raw_dir} already holds LGSR files; not generating")
        return 0
    cfg = preset(args.preset, **({"seed": args.seed} if args.seed is not None else {}))
    missing = [int(w) for w in args.missing_weeks.split(",") if w.strip()]
    report = generate(
        cfg,
        args.raw_dir,
        args.truth_dir,
        header=args.header,
        compress=args.gzip,
        missing_weeks=missing,
        progress=lambda w, n: (
            print(f"week {w:3d}: {n:,} rows", flush=True) if w % 10 == 0 else None
        ),
    )
    print(
        f"wrote {report.files} files, {report.rows:,} rows, {report.baskets:,} baskets "
        f"in {report.seconds:.1f}s to {args.raw_dir} (truth: {args.truth_dir})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
