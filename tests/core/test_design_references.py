"""Code, docstrings and UI descriptions cite docs/design.md by section, and every cited section
exists there; nothing points at files outside the repository."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retailsim_core", "retailsim_dagster", "retailsim_serve", "benchmarks")


def _sources():
    for package in PACKAGES:
        yield from (ROOT / package).rglob("*.py")


def test_every_cited_design_section_exists():
    headings = set(
        re.findall(r"^#+ ([0-9.]*[0-9]) ", (ROOT / "docs" / "design.md").read_text(), re.M)
    )
    cited = {
        (path.name, section)
        for path in _sources()
        for section in re.findall(r"[Dd]esign §([0-9.]*[0-9])", path.read_text())
    }
    assert len(cited) > 50
    assert sorted(c for c in cited if c[1] not in headings) == []


def test_no_reference_leaves_the_repository():
    texts = [*_sources(), ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    outside = [
        p.name
        for p in texts
        if re.search(r"\.\./shared|shared/seeds|[Ss]pec §", p.read_text())
        and p.name != "decisions.md"
    ]
    assert outside == []
