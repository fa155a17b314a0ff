"""The docs' tables of measured figures, generated from ``benchmarks/results/*.json``.

A page marks where a table goes::

    <!-- results AREA/TABLE -->
    (generated: the table, then where and when it was measured)
    <!-- /results -->

``python -m benchmarks.docs_tables`` rewrites every marked block of ``docs/*.md`` from the
results files; ``--check`` changes nothing and exits 1 naming each block that differs, which
``tests/benchmarks/test_docs_tables.py`` runs, so a page can no longer disagree with the
figures or with another page that shows the same table.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from benchmarks.results import RESULTS_DIR, load

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(
    r"(?P<open><!-- results (?P<area>[\w.-]+)/(?P<table>[\w.-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /results -->)",
    re.S,
)


def cell(value, fmt: str | None) -> str:
    """A cell as the page shows it: a number by its column's format (thousands separated by
    default), text as written, a missing figure as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value).replace("|", "\\|")  # a pipe would end the cell
    if fmt:
        return format(value, fmt)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def render_table(tab: dict) -> str:
    """Markdown: numeric columns right-aligned (every cell a number or missing)."""
    cols, rows, fmts = tab["columns"], tab["rows"], tab.get("formats", {})
    numeric = [
        all(
            r[i] is None or (isinstance(r[i], (int, float)) and not isinstance(r[i], bool))
            for r in rows
        )
        and any(r[i] is not None for r in rows)
        for i in range(len(cols))
    ]
    lines = [
        "| " + " | ".join(cols) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    for r in rows:
        lines.append(
            "| " + " | ".join(cell(v, fmts.get(c)) for c, v in zip(cols, r, strict=True)) + " |"
        )
    return "\n".join(lines)


def render_block(doc: dict, table_name: str) -> str:
    """The generated body of one block: the table and its provenance line."""
    m = doc["measured"]
    return (
        render_table(doc["tables"][table_name])
        + f"\n\n*`{doc['area']}.json`: measured at {m['commit']} on {m['date']} ({m['machine']})"
        + f" by `{doc['command']}`.*\n"
    )


def update(text: str, results: dict[str, dict], where: str = "page") -> tuple[str, list[str]]:
    """The page with every block regenerated, and the blocks whose text changed. A block that
    names a missing area or table is an error, not a silent skip."""
    changed: list[str] = []

    def sub(m: re.Match) -> str:
        area, name = m["area"], m["table"]
        if area not in results:
            raise KeyError(f"{where}: no results file for area {area!r}")
        if name not in results[area]["tables"]:
            raise KeyError(f"{where}: area {area!r} has no table {name!r}")
        body = render_block(results[area], name)
        if body != m["body"]:
            changed.append(f"{where}: {area}/{name}")
        return m["open"] + body + m["close"]

    return BLOCK.sub(sub, text), changed


def run(docs_dir: Path = DOCS_DIR, results_dir: Path = RESULTS_DIR, check: bool = False):
    """Regenerate (or, with ``check``, only compare) every page's blocks; the changed blocks,
    and the areas no page shows (a results file nobody reads is a figure lost)."""
    results = load(results_dir)
    changed, used = [], set()
    for page in sorted(docs_dir.glob("*.md")):
        text = page.read_text()
        used |= {m["area"] for m in BLOCK.finditer(text)}
        new, diff = update(text, results, where=page.name)
        changed += diff
        if diff and not check:
            page.write_text(new)
    return changed, sorted(set(results) - used)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = ap.parse_args()
    changed, unused = run(check=args.check)
    for name in changed:
        print(("differs: " if args.check else "rewritten: ") + name)
    for area in unused:
        print(f"no page shows {area}.json")
    sys.exit(1 if args.check and (changed or unused) else 0)


if __name__ == "__main__":
    main()
