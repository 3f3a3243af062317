"""The documentation: the README stays a short first read whose links hold, the docs site builds with ``mkdocs build
--strict`` (no broken link or anchor, no page left out of the navigation), its configuration reference is the one
the settings' declarations generate and names every setting, and its protocol coverage lists every request code
the name server and the broker answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sievemq.cli.app import REFERENCE_SECTIONS, reference_markdown
from sievemq.settings import describe

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
CONFIGURATION = DOCS / "configuration.md"
PROTOCOL_COVERAGE = DOCS / "protocol-coverage.md"
LAYOUT = DOCS / "layout.md"
SOURCE = REPO / "src" / "sievemq"
README_MAX_LINES = 300
"""What a newcomer reads in five minutes (issue 27); the reference lives in docs/."""
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
INCLUDE = re.compile(r'^--8<-- "README\.md:([a-z][-_0-9a-z]*)"$', re.M)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _config_class(name: str) -> type[Any]:
    """A role's settings class, by its name, from the reference's sections (wherever its module lives)."""
    (cls,) = [cls for _title, cls in REFERENCE_SECTIONS if cls.__name__ == name]
    return cls


@pytest.mark.parametrize("cls", [cls for _title, cls in REFERENCE_SECTIONS], ids=lambda cls: cls.__name__)
def test_every_setting_is_in_the_config_reference(cls: type) -> None:
    page = _text(CONFIGURATION)
    missing = [key for key, *_ in describe(cls) if f"| `{key}` |" not in page]
    assert not missing, f"docs/configuration.md's reference lacks {missing}"


def test_the_config_reference_is_the_generated_one() -> None:
    assert reference_markdown() in _text(CONFIGURATION), (
        "regenerate docs/configuration.md's table: sievemq config-reference --markdown"
    )


def test_every_broker_and_namesrv_request_code_is_listed(tmp_path: Path) -> None:
    import asyncio

    from sievemq.broker.controller import BrokerController
    from sievemq.namesrv.controller import NamesrvController

    namesrv_config, broker_config = _config_class("NamesrvConfig"), _config_class("BrokerConfig")

    async def tables() -> tuple[list[int], list[int]]:
        ns = NamesrvController(namesrv_config(listen_port=0))
        broker = BrokerController(broker_config(store_path_root_dir=str(tmp_path), namesrv_addr=""))
        return ns.server.table.codes(), broker.table.codes()

    ns_codes, broker_codes = asyncio.run(tables())
    assert ns_codes and broker_codes
    page = _text(PROTOCOL_COVERAGE)
    missing = [c for c in ns_codes + broker_codes if not re.search(rf"(?<![\d.]){c} [A-Z]", page)]
    assert not missing, f"docs/protocol-coverage.md lacks request codes {missing}"


def test_the_readme_is_a_short_first_read() -> None:
    lines = _text(README).splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move the reference into docs/"
    headings = [line for line in lines if line.startswith("## ")]
    assert "## Two commands" in headings and any("tour" in h for h in headings), headings


def test_the_readme_links_resolve() -> None:
    """GitHub shows the README with relative links into the repository; mkdocs does not check it, this does."""
    targets = [t for t in LINK.findall(_text(README)) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert any(t.startswith("docs/") for t in targets), targets
    broken = [t for t in targets if not (REPO / t.split("#", 1)[0]).exists()]
    assert not broken, f"README.md links to files that do not exist: {broken}"


def test_the_included_readme_sections_exist() -> None:
    """The pages that include a README section (``--8<-- "README.md:NAME"``) find its start and end markers."""
    readme = _text(README)
    names = {name for page in DOCS.rglob("*.md") for name in INCLUDE.findall(_text(page))}
    assert names, "no page includes a section of the README"
    for name in sorted(names):
        start, end = f"--8<-- [start:{name}]", f"--8<-- [end:{name}]"
        assert readme.count(start) == 1 and readme.count(end) == 1, f"README.md lacks the markers of {name!r}"
        assert readme.index(start) < readme.index(end), name


def test_the_layout_page_shows_the_layers_as_declared() -> None:
    """docs/layout.md's table has one row per package or root module of [tool.importlinter]'s layers, numbered
    bottom to top as declared there, and every package of src/sievemq/ is in it."""
    config = tomllib.loads(_text(REPO / "pyproject.toml"))["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    declared = {
        name.strip().removeprefix("sievemq."): number
        for number, layer in enumerate(reversed(layers), 1)
        for name in re.split(r"[|:]", layer)
    }
    rows = re.findall(r"^\| (\d+) \| `([a-z_]+)(/|\.py)` \|", _text(LAYOUT), re.M)
    shown = {name: int(number) for number, name, _ in rows}
    assert shown == declared, f"docs/layout.md's layers differ from pyproject.toml's: {shown} != {declared}"
    packages = {p.name for p in SOURCE.iterdir() if (p / "__init__.py").is_file()}
    assert packages <= set(shown), f"packages missing from docs/layout.md: {sorted(packages - set(shown))}"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (mkdocs.yml turns broken links and anchors, and pages missing from the navigation,
    into warnings, which --strict makes errors)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2, not about these pages
    site = tmp_path / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml")]
    res = subprocess.run([*command, "--site-dir", str(site)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=240)  # fmt: skip
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{res.stdout[-5000:]}\n{res.stderr[-5000:]}"
    assert (site / "index.html").is_file() and (site / "configuration" / "index.html").is_file()
    tour = (site / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert "produce.py" in tour and "--8&lt;--" not in tour, "the README's tour is not included in getting-started"
