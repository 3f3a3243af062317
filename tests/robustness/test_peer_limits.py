"""What one peer host can cost a real broker, and what it cannot take from the others (issue 26, items 7 and 8):
its share of the partial-frame budget, the connection with the largest unfinished frame closed rather than a
newcomer, large frames of unknown senders refused from their header under ACL, a connection cap per peer IP, a
place at the server's cap for a host with fewer connections, and timeouts for connections that never complete a
frame or go idle (docs/server-limits.md).

Hosts are loopback addresses (127.0.0.N: Linux routes all of 127/8 to lo); 127.0.0.1 is the legitimate client.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import time

import pytest

from sievemq.acl.signature import RequestSigner
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import FrameDecoder, RemotingCommand, encode, encode_header
from sievemq.remoting.connection import connect
from sievemq.remoting.limits import MiB
from tests.integration.conftest import Cluster
from tests.integration.helpers import eventually
from tests.robustness.test_connection_limits import is_closed, log_lines, log_size, produce_and_pull, sockets
from tests.support import wire
from tests.support.acl_files import open_acl
from tests.support.procs import Proc, broker_proc

ADMIN = ("adminAK1", "adminSK1-secret")
USER = ("userAK01", "userSK01-secret")
ACL = open_acl(USER, ADMIN, group_perm=None)


def start_broker(cluster: Cluster, *flags: str, acl: bool = False) -> Proc:
    """A broker without a name server (``acl``: checking ACL above), stopped by the ``cluster`` fixture."""
    if acl:
        path = cluster.tmp / "plain_acl.yml"
        path.write_text(ACL)
        flags = (*flags, "--acl-enable", "true", "--acl-file", str(path))
    proc = broker_proc(cluster.tmp, "", "broker-a", *flags)
    cluster.procs.append(proc)
    return proc.start()


def stall(broker: Proc, host: str, length: int, sent: int, fields: dict[str, str] | None = None) -> socket.socket:
    """A connection from ``host`` that sends the first ``sent`` bytes of a SEND_MESSAGE frame announcing ``length``
    (its first word), with ``fields`` in its header, and then nothing."""
    header = encode_header(RemotingCommand.request(RequestCode.SEND_MESSAGE, fields or {}))
    head = struct.pack(">ii", length, len(header)) + header
    s = socket.create_connection(("127.0.0.1", broker.port), source_address=(host, 0))
    s.settimeout(10.0)
    try:
        s.sendall(head + bytes(max(0, sent - len(head))))
        drained(s)
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed while sending: it went past a limit
    return s


def _hex_addr(host: str, port: int) -> str:
    """An IPv4 address as /proc/net/tcp writes it."""
    return f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"


def drained(s: socket.socket, timeout: float = 10.0) -> None:
    """Wait until the broker has read everything sent on ``s``: none of it unacknowledged in ``s``'s send queue,
    none of it unread in the broker's receive queue (/proc/net/tcp), unless the broker closed it."""
    local, remote = s.getpeername(), s.getsockname()
    row = f"{_hex_addr(*local)} {_hex_addr(*remote)} "
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        unacked = fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
        if struct.unpack("i", unacked)[0] == 0:
            with open("/proc/net/tcp") as f:
                rows = [line.split() for line in f if row in line]
            if not rows or all(r[4].endswith(":00000000") for r in rows):
                return
        time.sleep(0.01)
    raise AssertionError(f"the broker did not read what was sent from {remote}")


def closed_ones(socks: list[socket.socket], expected: int, timeout: float = 10.0) -> list[socket.socket]:
    """The sockets the broker closed, once ``expected`` of them are (or at the deadline)."""
    closed: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    while len(closed) < expected and time.monotonic() < deadline:
        closed = [s for s in socks if s in closed or is_closed(s, 0.05)]
    return closed


async def test_one_host_holds_at_most_its_share_of_unfinished_frames(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-partial-frame-budget", str(64 * MiB))  # a share of 16 MiB per host
    since = log_size(broker)
    with sockets() as held:
        for _ in range(4):  # 40 MiB from one host: all of them fit the budget, not its share
            held.append(stall(broker, "127.0.0.2", 15 * MiB, 10 * MiB))
        closed = closed_ones(held, 3)
        assert held[-1] not in closed and not is_closed(held[-1], 0.3), "the host's newest frame was closed"
        assert closed == held[:3], f"{len(closed)} of the host's 4 stalled frames closed"
        lines = log_lines(broker, since, "past the share of one peer IP of 16.0 MiB")
        assert len(lines) == 1 and "127.0.0.2" in lines[0], lines  # one line per host per 10 s
        took = await produce_and_pull(broker, "RbShare", bytes(3 * MiB))  # another host sends a large message
        assert took < 5.0


async def test_past_the_budget_the_largest_holder_is_closed_not_a_signed_newcomer(cluster: Cluster) -> None:
    # the scenario, scaled: hosts with a known access key (it is no secret) stall frames of 15.5 MiB until
    # the budget is all but full; an admin's signed 3 MiB send must still succeed
    broker = start_broker(cluster, "--server-partial-frame-budget", str(64 * MiB), acl=True)
    since = log_size(broker)
    size = 15 * MiB + MiB // 2
    hosts = [f"127.0.0.{i}" for i in range(2, 6)]
    admin = await connect("127.0.0.1", broker.port)
    admin.rpc_hook = RequestSigner(*ADMIN)
    try:
        with sockets() as held:
            for host in hosts:  # 62 MiB in all, each host within its share
                held.append(stall(broker, host, size, size - 1000, {"AccessKey": USER[0]}))
            assert closed_ones(held, 1, timeout=0.5) == [], "a stalled frame within the budget was closed"
            sent = await wire.send_message(admin, "RbBudget", bytes(3 * MiB), queue_id=0, timeout=10.0)
            assert sent.queue_offset == 0
            closed = closed_ones(held, 1)
            assert closed == [held[0]], f"{len(closed)} stalled frames closed"  # equal ones: the oldest goes
            assert not any(is_closed(s, 0.05) for s in held[1:])
            lines = log_lines(broker, since, "past their budget of 64.0 MiB")
            assert len(lines) == 1 and "from 127.0.0.2:" in lines[0], lines
            assert "(15.5 MiB) was the largest of the peer holding the most" in lines[0], lines
    finally:
        admin.close()


def _answer_then_close(s: socket.socket, timeout: float = 5.0) -> list[RemotingCommand]:
    """Every frame the broker sends on ``s`` until it closes it; fails if it does not close within ``timeout``."""
    decoder, out = FrameDecoder(), list[RemotingCommand]()
    s.settimeout(timeout)
    while True:
        try:
            data = s.recv(1 << 16)
        except ConnectionResetError:
            return out
        except TimeoutError:
            pytest.fail(f"not closed within {timeout} s; answers so far: {out}")
        if not data:
            return out
        out += decoder.feed(data)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [({}, Reason.ACL_NO_CREDENTIALS), ({"AccessKey": "nobody00"}, Reason.ACL_UNKNOWN_ACCOUNT)],
    ids=["no-access-key", "unknown-access-key"],
)
async def test_with_acl_a_large_frame_of_an_unknown_sender_is_refused_before_its_body(
    cluster: Cluster, fields: dict[str, str], reason: Reason
) -> None:
    broker = start_broker(cluster, acl=True)
    since = log_size(broker)
    with sockets() as opened:
        s = stall(broker, "127.0.0.2", 15 * MiB, 1, fields)  # its header and 1 byte of its body, then nothing
        opened.append(s)
        known = stall(broker, "127.0.0.3", 15 * MiB, 10_000, {"AccessKey": USER[0]})  # a known account: read on
        opened.append(known)
        (answer,) = _answer_then_close(s)
        assert answer.code == ResponseCode.NO_PERMISSION and answer.ext_fields.get("reason") == reason, answer
        assert not is_closed(known, 0.3)
    lines = log_lines(broker, since, "refused before its body was read")
    assert len(lines) == 1 and "127.0.0.2" in lines[0] and "15.0 MiB" in lines[0], lines
    admin = await connect("127.0.0.1", broker.port)  # a signed large send is served as ever
    admin.rpc_hook = RequestSigner(*ADMIN)
    try:
        assert (await wire.send_message(admin, "RbEarly", bytes(2 * MiB), queue_id=0)).queue_offset == 0
        admin.rpc_hook = RequestSigner(ADMIN[0], "not-the-secret")  # a wrong signature: refused once whole
        with pytest.raises(RemotingError) as e:
            await wire.send_message(admin, "RbEarly", bytes(2 * MiB), queue_id=0)
        assert e.value.reason == Reason.ACL_SIGNATURE
    finally:
        admin.close()


def _request(opaque: int) -> bytes:
    cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "RbCap", "queueId": 0})
    cmd.opaque = opaque
    return encode(cmd)


def served(s: socket.socket, opaque: int) -> bool:
    """Sends a small request on ``s``: True when it is answered, False when ``s`` is (or gets) closed."""
    try:
        s.sendall(_request(opaque))
        s.settimeout(5.0)
        return bool(s.recv(1 << 16))
    except (ConnectionResetError, BrokenPipeError):
        return False


async def test_a_host_at_its_connection_cap_cannot_keep_others_out(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-max-connections-per-ip", "20", "--server-max-connections", "30")
    since = log_size(broker)
    with sockets() as flood:
        outcome = []
        for i in range(40):  # every one completes a frame: nothing to tell them from real clients
            s = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.2", 0))
            flood.append(s)
            outcome.append(served(s, i + 1))
        assert outcome == [True] * 20 + [False] * 20, outcome
        others = []
        for i in range(10):  # 30 is the server's cap: another host fills it
            s = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.3", 0))
            flood.append(s)
            others.append(served(s, 100 + i))
        assert others == [True] * 10
        lines = log_lines(broker, since, "connections from 127.0.0.2 are open, the cap per peer IP")
        assert len(lines) == 1, lines  # rate-limited: one line per host per 10 s

    async def served_again() -> bool:  # once the broker saw them all closed
        try:
            return await produce_and_pull(broker, "RbCap") < 5.0
        except (RemotingError, OSError):
            return False

    await eventually(served_again, what="a client served once the flood closed")


async def test_at_the_server_cap_silent_connections_of_a_big_host_give_way(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-max-connections", "30")
    with sockets() as flood:
        for _ in range(30):
            flood.append(socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.2", 0)))
        assert served(flood[-1], 1)  # the 30th is served: all 30 are in
        took = await produce_and_pull(broker, "RbEvict")  # one more host: an unproven one of the flood gives way
        assert took < 5.0
        closed = closed_ones(flood, 1)
        assert closed == [flood[0]], f"{len(closed)} closed"  # the oldest that never completed a frame


async def test_connections_that_never_complete_a_frame_are_closed_in_time(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-first-frame-timeout-seconds", "1")  # the frame timeout stays 30 s
    since = log_size(broker)
    with sockets() as opened:
        silent = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.2", 0))
        half = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.3", 0))
        good = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.4", 0))
        opened += [silent, half, good]
        frame = _request(1)
        half.sendall(frame[: 8 + (len(frame) - 8) // 2])  # its prefix and half its header
        assert served(good, 2)  # one complete frame, then silent too
        assert closed_ones([silent, half], 2, timeout=10.0) == [silent, half]
        assert not is_closed(good, 0.5)
    lines = log_lines(broker, since, "no complete frame 1 s after it connected")
    assert len(lines) == 2, lines


async def test_idle_connections_are_closed_and_busy_ones_kept(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-channel-max-idle-time-seconds", "1.5")
    with sockets() as opened:
        idle = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.2", 0))
        chatty = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.3", 0))
        opened += [idle, chatty]
        assert served(idle, 1)
        start = time.monotonic()
        while not is_closed(idle, 0.05):  # a client that sends every 0.3 s meanwhile is never idle that long
            assert served(chatty, 2) and time.monotonic() - start < 10.0
            time.sleep(0.25)
        assert time.monotonic() - start >= 1.0
        assert served(chatty, 3)
