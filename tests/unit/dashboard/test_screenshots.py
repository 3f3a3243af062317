"""The dashboard's screenshots (docs/dashboard/*.png, made by scripts/dashboard_screenshots.py): every one the guide's
dashboard section (docs/monitoring.md, the README's until issue 27) and docs/dashboard.md show exists and is a real
PNG of a reasonable size, both documents show the same ones, and every file of docs/dashboard/ is shown."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SHOTS = ROOT / "docs" / "dashboard"
DOCS = (ROOT / "docs" / "monitoring.md", ROOT / "docs" / "dashboard.md")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
MIN_BYTES = 15_000
"""A page with content compresses to more than this; a blank or error page to less."""


def referenced(doc: Path) -> set[Path]:
    """The PNG files ``doc`` shows (Markdown images), resolved from its folder."""
    return {(doc.parent / ref).resolve() for ref in IMAGE.findall(doc.read_text(encoding="utf-8"))}


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; AssertionError when ``data`` is not a PNG."""
    assert data.startswith(PNG_MAGIC) and data[12:16] == b"IHDR", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_every_screenshot_shown_is_a_real_png() -> None:
    for doc in DOCS:
        shown = referenced(doc)
        assert shown, f"{doc.name} shows no screenshot"
        for path in sorted(shown):
            assert path.is_file(), f"{doc.name} shows {path.relative_to(ROOT)}, which does not exist"
            data = path.read_bytes()
            width, height = png_size(data)
            assert width >= 1000 and 400 <= height <= 5000, (path.name, width, height)
            assert len(data) > MIN_BYTES, f"{path.name} is {len(data)} bytes: a blank page?"


def test_both_documents_show_every_screenshot() -> None:
    guide, design = (referenced(doc) for doc in DOCS)
    files = {p.resolve() for p in SHOTS.glob("*.png")}
    assert len(files) >= 8, sorted(p.name for p in files)
    assert guide == design == files, {
        "only in docs/monitoring.md": sorted(p.name for p in guide - design),
        "only in docs/dashboard.md": sorted(p.name for p in design - guide),
        "in docs/dashboard/ but not shown": sorted(p.name for p in files - guide - design),
        "shown but not in docs/dashboard/": sorted(str(p) for p in (guide | design) - files),
    }
