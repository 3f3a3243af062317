"""``sievemq config-reference`` prints every setting of every role (name server, broker, filter server, proxy,
dashboard), as text and as the table of docs/configuration.md (a real process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sievemq.cli.app import REFERENCE_SECTIONS
from sievemq.settings import describe


def run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    res = subprocess.run([sys.executable, "-m", "sievemq.cli", "config-reference", *args], env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0 and not res.stderr, res.stderr
    return res.stdout


def sections(text: str, start: str, titles: list[str]) -> dict[str, str]:
    """The text of each role's section (from its title to the next one)."""
    out: dict[str, str] = {}
    for i, title in enumerate(titles):
        head = text.index(start + title)
        end = text.index(start + titles[i + 1]) if i + 1 < len(titles) else len(text)
        out[title] = text[head:end]
    return out


@pytest.mark.parametrize("markdown", [False, True], ids=["text", "markdown"])
def test_every_role_and_every_setting(markdown: bool) -> None:
    titles = [title.replace("`", "") if not markdown else title for title, _ in REFERENCE_SECTIONS]
    text = run("--markdown") if markdown else run()
    parts = sections(text, "| **" if markdown else "[", titles)
    assert any("filter server" in t for t in titles) and any("proxy" in t for t in titles), titles
    for (title, cls), shown in zip(REFERENCE_SECTIONS, titles, strict=True):
        body = parts[shown]
        missing = [key for key, *_ in describe(cls) if (f"| `{key}` |" if markdown else f"  {key} ") not in body]
        assert not missing, f"{title}: {missing}"
