"""Fixtures for the robustness tests: the integration tests' real processes (``cluster``, ``open_conn``), and
the hook that attaches their logs to a failure."""

from __future__ import annotations

from tests.integration.conftest import (  # noqa: F401 - fixtures and hook, re-exported for this folder
    broker,
    cluster,
    ns,
    open_conn,
    pytest_runtest_makereport,
)
