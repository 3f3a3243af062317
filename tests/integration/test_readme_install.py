"""The README's first command, as printed, on a fresh copy of the checkout: it makes a virtual environment, installs
sievemq into it and runs ``sievemq dev``, which serves (issue 16.6).

A soak test (``pytest -m soak``): it installs every dependency into a new environment, which takes minutes and the
package index. The command's steps run in their order, the installing ones on this machine's network (they reach
the package index), the last one (``sievemq dev``) in a network namespace of its own, so it has its default ports.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.netns import NoNamespaces, loopback_only

pytestmark = pytest.mark.soak
REPO = Path(__file__).resolve().parents[2]


def first_command() -> str:
    """The ```sh block under the README's "Two commands" heading."""
    section = (REPO / "README.md").read_text().split("## Two commands", 1)[1]
    match = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert match is not None, "no sh block under 'Two commands'"
    return match.group(1).strip()


def fresh_copy(dest: Path) -> None:
    """The files git tracks (as they are in the working tree): what a clone would hold, without build leftovers."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def test_the_readme_first_command_installs_into_a_venv_and_serves(tmp_path: Path) -> None:
    command = first_command()
    assert command.startswith("python3 -m venv .venv") and command.endswith(".venv/bin/sievemq dev"), command
    *install, serve = command.split(" && ")
    checkout = tmp_path / "sievemq"
    fresh_copy(checkout)
    res = subprocess.run(["bash", "-c", " && ".join(install)], cwd=checkout, capture_output=True, text=True,
                         timeout=1200)  # fmt: skip
    assert res.returncode == 0, f"{' && '.join(install)}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    log = tmp_path / "first-command.log"
    try:
        with loopback_only("in") as prefix, open(log, "wb") as out:
            proc = subprocess.Popen([*prefix, "bash", "-c", serve], cwd=checkout, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            try:
                deadline = time.monotonic() + 900
                while b"Press Ctrl-C to stop." not in log.read_bytes():
                    assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()[-5000:]}"
                    assert time.monotonic() < deadline, log.read_text()[-5000:]
                    time.sleep(1)
                listed = subprocess.run([*prefix, str(checkout / ".venv/bin/sievemq"), "topic", "list"],
                                        capture_output=True, text=True, timeout=60)  # fmt: skip
                assert listed.returncode == 0, listed.stderr
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)  # bash and the sievemq it started (our own group)
                    proc.wait(60)
    except NoNamespaces as e:
        pytest.skip(f"needs a network namespace for the default ports: {e}")
    assert "stopped cleanly" in log.read_text(), log.read_text()[-3000:]
