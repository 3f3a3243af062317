"""Network partitions between chosen hosts (``tests/support/netns.py``), not the whole link: nftables rules inside a
host's namespace drop what it receives from, and what it sends to, the given addresses.

Everything else keeps flowing: the other hosts among themselves, and the test's own process (the bridge's address)
with every host, so a test watches both sides of a partition. The rules live in one table of the host's namespace
(``TABLE``); ``heal`` removes it, the context managers always do, and ``hosts()`` removes the namespace anyway.
Packets are dropped, not refused: connections across the cut hang as on a real network, until their peers time out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence

from tests.support.netns import Host

__all__ = ["TABLE", "heal", "isolate", "isolated", "partition", "partitions_available", "rules"]

TABLE = "sievemq_partition"


def _nft(host: Host, *args: str, script: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [*host.prefix(), "nft", *(("-f", "-") if script is not None else args)]
    r = subprocess.run(cmd, input=script, capture_output=True, text=True, timeout=10)
    if check and r.returncode != 0:
        raise RuntimeError(f"nft in {host.ns} failed ({r.returncode}): {r.stderr.strip()}\n{script or ' '.join(args)}")
    return r


def partitions_available(host: Host) -> str | None:
    """None when nftables rules work in ``host``'s namespace (a table made, then removed), else why not."""
    if shutil.which("nft") is None:
        return "nft (nftables) is not installed"
    try:
        _nft(host, script=f"add table inet {TABLE}_probe\ndelete table inet {TABLE}_probe\n")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return f"nftables does not work here: {e}"
    return None


def _addrs(peers: Iterable[str | Host]) -> list[str]:
    out = []
    for p in peers:
        ip = p.ip if isinstance(p, Host) else p
        out.append(str(ipaddress.IPv4Address(ip)))  # the hosts are IPv4; a typo fails here, not in nft's syntax
    return out


def isolate(host: Host, peers: Iterable[str | Host], *, inbound: bool = True, outbound: bool = True) -> None:
    """Drop traffic between ``host`` and each of ``peers`` (addresses or hosts): what it receives from them
    (``inbound``) and what it sends to them (``outbound``); both by default, one of them for a one-way fault.
    Adds to an earlier ``isolate`` of the same host."""
    ips = _addrs(peers)
    t = f"inet {TABLE}"
    lines = [
        f"add table {t}",
        f"add set {t} drop_in {{ type ipv4_addr; }}",
        f"add set {t} drop_out {{ type ipv4_addr; }}",
        f"add chain {t} input {{ type filter hook input priority -200; policy accept; }}",
        f"add chain {t} output {{ type filter hook output priority -200; policy accept; }}",
        f"flush chain {t} input",  # the rules once, however often isolate is called
        f"flush chain {t} output",
        f"add rule {t} input ip saddr @drop_in drop",
        f"add rule {t} output ip daddr @drop_out drop",
    ]
    if ips and inbound:
        lines.append(f"add element {t} drop_in {{ {', '.join(ips)} }}")
    if ips and outbound:
        lines.append(f"add element {t} drop_out {{ {', '.join(ips)} }}")
    _nft(host, script="\n".join(lines) + "\n")  # one transaction: all of it or nothing


def heal(host: Host) -> None:
    """Remove every cut ``isolate`` made on ``host`` (nothing to do when there is none)."""
    if _nft(host, "list", "table", "inet", TABLE, check=False).returncode == 0:
        _nft(host, "delete", "table", "inet", TABLE)


def rules(host: Host) -> str:
    """The partition rules on ``host`` as nft prints them ("" when there are none): for a failure message."""
    r = _nft(host, "list", "table", "inet", TABLE, check=False)
    return r.stdout if r.returncode == 0 else ""


@contextlib.contextmanager
def isolated(host: Host, peers: Iterable[str | Host], *, inbound: bool = True, outbound: bool = True) -> Iterator[None]:
    """``isolate`` for the block, ``heal`` after it, whatever happened."""
    try:
        isolate(host, peers, inbound=inbound, outbound=outbound)
        yield
    finally:
        heal(host)


@contextlib.contextmanager
def partition(*groups: Sequence[Host]) -> Iterator[None]:
    """Split the hosts into ``groups`` for the block: every host is cut from every host of the other groups (both
    ways); hosts of one group, and the test's process, still reach each other. Healed on exit.

    ``partition([a], [b, c])`` cuts ``a`` off ``b`` and ``c``."""
    touched: list[Host] = []
    try:
        for g, group in enumerate(groups):
            others = [h for o, other in enumerate(groups) if o != g for h in other]
            for host in group:
                touched.append(host)
                isolate(host, others)
        yield
    finally:
        for host in touched:
            heal(host)
