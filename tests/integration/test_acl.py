"""Access control against real processes: a broker and a name server with ``aclEnable`` on, sievemq's client and
CLI with right, wrong and missing credentials, every permission, admin codes, reloads, signed registrations."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from sievemq import Message, Producer
from sievemq.acl.classification import BROKER_ADMIN_CODES
from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason, reason_of
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.acl_cluster import ACL, ADMIN, USER, acl_args, collecting_consumer, signed_conn
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_group, eventually
from tests.support.procs import Proc, free_port


async def send(ns: Proc, topic: str, account: tuple[str, str] | None) -> RemotingError | None:
    ak, sk = account or ("", "")
    async with Producer(ns.addr, "PG", access_key=ak, secret_key=sk, retry_times=0, send_timeout=5) as p:
        try:
            await p.send(Message(topic, b"hello " + topic.encode()))
        except RemotingError as e:
            return e
    return None


def refused(err: RemotingError | None, reason: Reason) -> bool:
    return err is not None and err.code == ResponseCode.NO_PERMISSION and err.reason == reason


async def test_client_credentials_right_wrong_missing(acl: tuple[Proc, Proc, Path]) -> None:
    ns, broker, _ = acl
    assert await send(ns, "TopicOK", USER) is None
    assert refused(await send(ns, "TopicOK", (USER[0], "not-the-secret")), Reason.ACL_SIGNATURE)
    assert refused(await send(ns, "TopicOK", None), Reason.ACL_NO_CREDENTIALS)
    assert refused(await send(ns, "TopicOK", ("nobody99", "whatever1")), Reason.ACL_UNKNOWN_ACCOUNT)
    err = await send(ns, "TopicOK", (USER[0], "not-the-secret"))
    assert err is not None and "not-the-secret" not in str(err) and USER[1] not in str(err)
    assert "ACL_SIGNATURE" in broker.log() and USER[1] not in broker.log()


async def test_each_permission(acl: tuple[Proc, Proc, Path], open_conn: OpenConn) -> None:
    ns, broker, _ = acl
    assert await send(ns, "TopicPub", USER) is None
    assert await send(ns, "TopicOK", USER) is None
    for topic in ("TopicSub", "TopicDeny", "TopicNew"):  # SUB only, DENY, the default (DENY)
        err = await send(ns, topic, USER)
        assert refused(err, Reason.NO_PERMISSION), f"{topic}: {err!r}"
        assert err is not None and topic in err.remark and "PUB" in err.remark
    conn = await signed_conn(open_conn, broker, USER)
    for topic, group, ok in [
        ("TopicOK", "GroupOK", True),
        ("TopicSub", "GroupOK", True),
        ("TopicPub", "GroupOK", False),  # PUB only
        ("TopicDeny", "GroupOK", False),
        ("TopicOK", "GroupDeny", False),  # the group is denied
        ("TopicOK", "GroupOther", False),  # defaultGroupPerm DENY
    ]:
        r = await api.pull_message(conn, group, topic, 0, 0)
        if ok:
            assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), f"{topic}/{group}: {r.remark}"
        else:
            assert (r.code, r.reason) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION), f"{topic}/{group}"
    # a whole consumer (heartbeats, pulls, offset commits) with the right account receives what was sent
    consumer, got = collecting_consumer(ns.addr, "GroupOK", "TopicOK", USER)
    async with consumer:
        await eventually(lambda: got, timeout=20, what="a message consumed")
    assert got[0].body == b"hello TopicOK"


async def test_every_admin_code_is_refused_to_a_non_admin(acl: tuple[Proc, Proc, Path], open_conn: OpenConn) -> None:
    _, broker, _ = acl
    user, admin, unsigned = [await signed_conn(open_conn, broker, a) for a in (USER, ADMIN, None)]
    fields = {"topic": "TopicOK", "consumerGroup": "GroupOK", "filterServerAddr": "127.0.0.1:1", "offset": 0,
              "expression": "*", "expressionType": "TAG", "groupName": "GroupOK"}  # fmt: skip
    walked = []
    for code in sorted(BROKER_ADMIN_CODES):
        if code == 25:  # UPDATE_BROKER_CONFIG: not served (3) whoever asks
            continue
        walked.append(code)
        r = await call(user, code, fields)
        assert (r.code, reason_of(r.ext_fields)) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION), code
        assert "admin" in (r.remark or "")
        r = await call(unsigned, code, fields)
        assert reason_of(r.ext_fields) == Reason.ACL_NO_CREDENTIALS, code
        r = await call(admin, code, fields)
        assert r.code != ResponseCode.NO_PERMISSION, f"admin refused {code}: {r.remark}"
    assert len(walked) == 31  # the newest: 30013 EXPLAIN_MESSAGE; before it mqadmin's (18, 26, 204, 225, 306...)
    # a read without resources needs only a valid signature
    assert (await call(user, RequestCode.GET_TOPIC_NAME_LIST)).code == ResponseCode.SUCCESS


async def test_operator_codes_need_their_rights(acl: tuple[Proc, Proc, Path], open_conn: OpenConn) -> None:
    """Progress (208), clients (203) and consumers of a topic (300) need SUB on the group / a right on the topic;
    an offset reset (222) needs an admin account (docs/admin.md §7)."""
    ns, broker, _ = acl
    user, admin = [await signed_conn(open_conn, broker, a) for a in (USER, ADMIN)]
    for code, fields, ok in [
        (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "GroupOK", "topic": "TopicSub"}, True),
        (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "GroupOK"}, True),
        (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "GroupDeny"}, False),
        (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "GroupOK", "topic": "TopicDeny"}, False),
        (RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "GroupOK"}, True),
        (RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "GroupDeny"}, False),
        (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "TopicPub"}, True),
        (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "TopicDeny"}, False),
    ]:
        r = await call(user, code, fields)
        refused = (r.code, reason_of(r.ext_fields)) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION)
        assert refused != ok, (code, fields, r.code, r.remark)
    reset = {"topic": "TopicOK", "group": "GroupOK", "timestamp": 0, "isForce": True}
    r = await call(user, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
    assert (r.code, reason_of(r.ext_fields)) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION)
    await create_group(admin, "GroupOK")
    await call(admin, RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GroupOK", "topic": "TopicOK",
                                                            "queueId": 0, "commitOffset": 0})  # fmt: skip
    r = await call(admin, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
    assert r.code == ResponseCode.SUCCESS, r.remark
    # the CLI with the user's account: refused with the reason, no traceback
    rc, out = await run_cli("group", "reset-offset", "GroupOK", "-t", "TopicOK", "--to", "earliest", "-n", ns.addr,
                            "--access-key", USER[0], "--secret-key", USER[1])  # fmt: skip
    assert rc == 1 and "NOT reset" in out and "needs an admin account" in out and "Traceback" not in out, out


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sievemq.cli", *args, env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(errors="replace")


async def test_cli_flags_env_and_profile(acl: tuple[Proc, Proc, Path], tmp_path: Path) -> None:
    ns, _, _ = acl
    creds = tmp_path / "credentials"
    creds.write_text(f'[default]\naccess_key = "{USER[0]}"\nsecret_key = "{USER[1]}"\n'
                     f'[ops]\naccess_key = "{ADMIN[0]}"\nsecret_key = "{ADMIN[1]}"\n')  # fmt: skip
    base = {"SIEVEMQ_CREDENTIALS_FILE": str(tmp_path / "none"), "AK": "", "SK": "", "SIEVEMQ_PROFILE": ""}
    code, out = await run_cli("topic", "create", "CliA", "-n", ns.addr, env=base)
    assert code != 0 and "carries no AccessKey" in out, out
    code, out = await run_cli("topic", "create", "CliA", "-n", ns.addr, "--access-key", ADMIN[0],
                              "--secret-key", ADMIN[1], env=base)  # fmt: skip
    assert code == 0, out
    code, out = await run_cli("topic", "create", "CliB", "-n", ns.addr, env={**base, "AK": USER[0], "SK": USER[1]})
    assert code != 0 and "is not an admin" in out, out
    with_file = {**base, "SIEVEMQ_CREDENTIALS_FILE": str(creds)}
    code, out = await run_cli("topic", "create", "CliB", "-n", ns.addr, "--profile", "ops", env=with_file)
    assert code == 0, out
    code, out = await run_cli("produce", "TopicOK", "-n", ns.addr, "--body", "from the cli", env=with_file)
    assert code == 0 and "SEND_OK" in out, out
    code, out = await run_cli("produce", "TopicOK", "-n", ns.addr, "--access-key", USER[0], "--secret-key", "wrong",
                              env=with_file)  # fmt: skip
    assert code != 0 and "signature" in out, out


async def test_the_file_is_reloaded_and_a_broken_one_keeps_the_last_rules(acl: tuple[Proc, Proc, Path]) -> None:
    ns, broker, path = acl
    assert refused(await send(ns, "TopicNew", USER), Reason.NO_PERMISSION)
    path.write_text(ACL.replace("TopicDeny=DENY]", "TopicDeny=DENY, TopicNew=PUB]"))
    await eventually(lambda: send_ok(ns, "TopicNew"), timeout=15, interval=0.5, what="the grant in force")
    assert "ACL file" in broker.log() and "reloaded" in broker.log()
    path.write_text("accounts: [\n  - accessKey: broken\n")

    async def broken_seen() -> bool:  # the file is looked at when requests come (at most every 2 s)
        assert await send(ns, "TopicNew", USER) is None  # the grant survives the broken file
        return "previous ACL rules stay in force" in broker.log()

    await eventually(broken_seen, timeout=15, interval=0.5, what="a failed reload")
    assert refused(await send(ns, "TopicDeny", USER), Reason.NO_PERMISSION)


async def send_ok(ns: Proc, topic: str) -> bool:
    return await send(ns, topic, USER) is None


async def test_name_server_refuses_unsigned_registrations(
    cluster: Cluster, tmp_path: Path, open_conn: OpenConn
) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    port = free_port()
    ns = cluster._start(Proc(["namesrv", "--listen-port", str(port), *acl_args(path)], port, tmp_path / "ns.log"))
    good = cluster.broker(ns.addr, "broker-good", "--acl-access-key", ADMIN[0], "--acl-secret-key", ADMIN[1])
    fake = cluster.broker(ns.addr, "broker-fake")
    wrong = cluster.broker(ns.addr, "broker-wrong", "--acl-access-key", ADMIN[0], "--acl-secret-key", "bad-secret")
    user = cluster.broker(ns.addr, "broker-user", "--acl-access-key", USER[0], "--acl-secret-key", USER[1])
    async with AdminClient(ns.addr) as reader:  # reads need no credentials
        names = await eventually(lambda: brokers_named(reader), timeout=15, what="a registered broker")
        # the others have been refused over several registration rounds (each logs every refusal)
        await eventually(lambda: all(b.log().count("refused registration") >= 3 for b in (fake, wrong, user)),
                         timeout=30, interval=0.2, what="three refused registrations of each other broker")  # fmt: skip
        assert await brokers_named(reader) == {"broker-good"}, names
    assert "refused registration: [16]" in fake.log()
    for b, reason in ((fake, "ACL_NO_CREDENTIALS"), (wrong, "ACL_SIGNATURE"), (user, "NO_PERMISSION")):
        assert reason in ns.log(), f"{b.args[2]}: {reason}"
    conn = await open_conn(ns)
    header = {"brokerName": "x", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": 0, "haServerAddr": ""}
    r = await call(conn, RequestCode.REGISTER_BROKER, header, b"{}")
    assert (r.code, reason_of(r.ext_fields)) == (ResponseCode.NO_PERMISSION, Reason.ACL_NO_CREDENTIALS)
    conn.rpc_hook = RequestSigner(*ADMIN)
    assert (await call(conn, RequestCode.UNREGISTER_BROKER, header)).code == ResponseCode.SUCCESS
    assert good.popen is not None and good.popen.poll() is None


async def brokers_named(admin: AdminClient) -> set[str]:
    return {b.name for b in await admin.brokers()}


async def test_the_brokers_filter_servers_sign_and_check(cluster: Cluster, tmp_path: Path, open_conn: OpenConn) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    fs_cfg = tmp_path / "filtersrv.toml"
    fs_cfg.write_text("workerCount = 1\nregisterIntervalSeconds = 1\n")
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", *acl_args(path), "--filter-server-nums", "1",
                            "--filter-server-config", str(fs_cfg), "--acl-access-key", ADMIN[0],
                            "--acl-secret-key", ADMIN[1])  # fmt: skip
    async with AdminClient(ns.addr, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        await eventually(admin.brokers, what="the broker registered")
        await admin.create_topic("TopicPub", queues=1)

        async def filter_server() -> str | None:  # registered (301 is admin-only): it signed with the account
            try:
                servers = (await admin.route("TopicPub")).filter_server_table.get(broker.addr, [])
            except RemotingError:
                return None
            return servers[0] if servers else None

        addr = await eventually(filter_server, timeout=20, interval=0.2, what="the filter server registered")
    port = int(addr.rpartition(":")[2])
    unsigned = await open_conn(port)
    r = await call(unsigned, RequestCode.FILTERSRV_STATUS)
    assert (r.code, reason_of(r.ext_fields)) == (ResponseCode.NO_PERMISSION, Reason.ACL_NO_CREDENTIALS)
    admin_conn = await open_conn(port)
    admin_conn.rpc_hook = RequestSigner(*ADMIN)
    assert (await call(admin_conn, RequestCode.FILTERSRV_STATUS)).code == ResponseCode.SUCCESS
    user = await open_conn(port)
    user.rpc_hook = RequestSigner(*USER)
    r = await call(user, RequestCode.FILTERSRV_STATUS)
    assert reason_of(r.ext_fields) == Reason.NO_PERMISSION  # a status needs an admin
    pulled = await api.pull_message(user, "GroupOK", "TopicPub", 0, 0, subscription=None, class_filter=True)
    assert (pulled.code, pulled.reason) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION)  # no SUB: no bypass


async def test_pop_ack_and_change_need_sub_on_the_topic_and_the_group(
    acl: tuple[Proc, Proc, Path], open_conn: OpenConn
) -> None:
    from sievemq.client import pop_api

    _, broker, _ = acl
    conn = await signed_conn(open_conn, broker, USER)
    for topic, group, ok in [("TopicOK", "GroupOK", True), ("TopicPub", "GroupOK", False),
                             ("TopicOK", "GroupDeny", False)]:  # fmt: skip
        try:
            await pop_api.pop_message(conn, group, topic, 0, invisible_ms=1000)
            assert ok, f"POP of {topic}/{group} was allowed"
        except RemotingError as e:
            assert not ok and (e.code, e.reason) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION), e
    for code in (RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
        fields = {"consumerGroup": "GroupOK", "extraInfo": "1 broker-a TopicPub 0 0 1", "invisibleTime": "5000"}
        resp = await call(conn, code, fields)
        assert (resp.code, reason_of(resp.ext_fields)) == (ResponseCode.NO_PERMISSION, Reason.NO_PERMISSION), (
            f"{code.name} of a message of a topic the account may not read"
        )
