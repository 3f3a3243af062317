"""The HTTP settings every role declares (``httpListenHost``, ``httpListenPort``) and each role's default port.

``httpListenPort`` is -1 by default: the port follows the role's own ``listenPort`` (``PORT_OFFSETS``), so that
roles started side by side on one host (a name server, a master and a slave, a proxy) never ask for the same HTTP
port, and a second broker moved to another ``listenPort`` moves its HTTP port with it. 0 turns the port off.
``sievemq dev`` has one HTTP port for its three roles, 8080 (``--http-port``). A filter server has none unless
given one: a broker starts several of them on ephemeral ports (docs/metrics.md §1).
"""

from __future__ import annotations

__all__ = ["DEV_PORT", "PORT_OFFSETS", "derived_problem", "host_doc", "http_port", "port_doc"]

DEV_PORT = 8080
"""``sievemq dev``'s HTTP port."""
PORT_OFFSETS = {"namesrv": 1, "broker": 2, "proxy": -1}
"""The default HTTP port of a role, from its ``listenPort``: name server 9876 -> 9877, broker 10911 -> 10913 (10912
is its HA port), proxy 8081 -> 8080."""


def _derived(offset: int) -> str:
    return f"listenPort {'+' if offset > 0 else '-'} {abs(offset)}"


def port_doc(role: str) -> tuple[str, int]:
    """(doc, default) of ``httpListenPort`` for ``role`` (a key of ``PORT_OFFSETS``, or ``filtersrv``)."""
    offset = PORT_OFFSETS.get(role)
    if offset is None:
        return "HTTP port serving /metrics (Prometheus) and /healthz (0: none)", 0
    return f"HTTP port serving /metrics (Prometheus) and /healthz (0: none; -1: {_derived(offset)})", -1


def host_doc() -> tuple[str, str]:
    """(doc, default) of ``httpListenHost``."""
    return "address of the HTTP port (empty: every interface); /metrics has no authentication", "127.0.0.1"


def http_port(role: str, setting: int, listen_port: int) -> int | None:
    """The port to bind for ``role``: None when off (0), the ``PORT_OFFSETS`` one for -1 (0, an ephemeral port,
    when ``listenPort`` is 0 too; None when it would fall outside 1..65535: ``derived_problem`` says so)."""
    if setting == 0:
        return None
    if setting > 0:
        return setting
    if listen_port == 0:
        return 0
    port = listen_port + PORT_OFFSETS.get(role, 0)
    return port if 1 <= port <= 65535 else None


def derived_problem(role: str, setting: int, listen_port: int) -> str | None:
    """Why a role asked for the derived port (-1) has none, or None."""
    if setting != -1 or listen_port == 0 or http_port(role, setting, listen_port) is not None:
        return None
    offset = PORT_OFFSETS.get(role, 0)
    return (f"no HTTP port: httpListenPort -1 means {_derived(offset)}, which is {listen_port + offset} here; set "
            "httpListenPort (--http-listen-port) to a port in 1..65535")  # fmt: skip
