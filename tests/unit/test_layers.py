"""The package's layers hold at run time too: a server process does not load the client, the admin tools, the CLI,
the proxy or the dashboard (``lint-imports`` checks the import graph statically; this checks what a role's process
really imports, lazy imports included)."""

from __future__ import annotations

import subprocess
import sys

import pytest

UPPER = ("sievemq.client", "sievemq.sync", "sievemq.admin", "sievemq.cli", "sievemq.proxy", "sievemq.dashboard")


@pytest.mark.parametrize(
    "role",
    ["sievemq.broker.controller", "sievemq.namesrv.controller", "sievemq.filtersrv.controller", "sievemq.store"],
)
def test_a_server_role_loads_nothing_above_it(role: str) -> None:
    code = (
        f"import sys, {role}\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({UPPER!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == [], f"{role} loads {out.stdout.split()}"


def test_the_public_names_still_import_from_the_package_root() -> None:
    import sievemq

    for name in sievemq.__all__:
        assert getattr(sievemq, name) is not None, name
    from sievemq import Message, Producer  # noqa: F401  (the README's import)
    from sievemq.sync import Producer as SyncProducer  # noqa: F401
