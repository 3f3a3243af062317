"""Whether this process could listen on a TCP address, asked before a server that cannot say it well tries
(gRPC's core logs its own ``add_port.cc`` line and a ``GRPC_VERBOSITY`` hint, then fails with no reason)."""

from __future__ import annotations

import errno
import socket

__all__ = ["listen_problem"]


def listen_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (``"the port is taken"``, ...), or None when it can (or ``port`` is 0:
    any free port). Binds and closes a socket with SO_REUSEADDR, as servers do, on every address ``host`` resolves
    to ("" or ``0.0.0.0``: every interface)."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return f"the host does not resolve ({e.strerror})"
    for family, kind, proto, _name, addr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    return "the port is taken"
                if e.errno == errno.EADDRNOTAVAIL:
                    return "the address is not one of this machine's"
                return e.strerror or str(e)
    return None
