"""The dashboard in front of brokers that check ACL (docs/dashboard.md §5): with an admin account from the
environment (SIEVEMQ_DASHBOARD_ACCESS_KEY / _SECRET_KEY) every view answers, to a user of its users file only (an
account means logins by default: a standalone dashboard without a users file does not start); without one, what
the brokers refuse is a 502 carrying the broker's reason, and the views that fan out list the refusing broker under
``errors``. ``sievemq dev`` with ACL on asks for a login: its first start makes the users file (0600, the token's
hash only) and prints the admin token once; without ACL it asks for none."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import subprocess
import sys
from pathlib import Path

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from tests.dashboard.conftest import Answer, get
from tests.integration.conftest import Cluster, cluster  # noqa: F401  (the fixture)
from tests.integration.helpers import eventually
from tests.support.procs import Proc, dev_proc, free_port

ADMIN = ("dashAdmin1", "dashAdmin1-secret")
ACL = f"""
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""


TOKEN = secrets.token_urlsafe(32)
USERS = f'[[users]]\nname = "ops"\ntokenHash = "sha256:{hashlib.sha256(TOKEN.encode()).hexdigest()}"\nrole = "admin"\n'
AS_OPS = {"Authorization": f"Bearer {TOKEN}"}


def dashboard(cluster: Cluster, ns: Proc, name: str, env: dict[str, str], *extra: str) -> str:  # noqa: F811
    port = free_port()
    proc = Proc(["dashboard", "--namesrv-addr", ns.addr, "--http-port", str(port), *extra], port,
                cluster.tmp / f"{name}.log", ready_text="sievemq dashboard on", env=env)  # fmt: skip
    cluster._start(proc)
    return f"http://127.0.0.1:{port}/api"


async def test_the_dashboard_needs_an_admin_account(cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    ns = cluster.namesrv()
    cluster.broker(ns.addr, "broker-a", "--acl-enable", "true", "--acl-file", str(acl))
    async with AdminClient(ns.addr, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        await eventually(admin.brokers, what="the broker registered")
        await admin.create_topic("Secured", queues=2)
    producer = Producer(ns.addr, "acl-producer", access_key=ADMIN[0], secret_key=ADMIN[1])
    await producer.start()
    try:
        await producer.send(Message("Secured", b"hello", tags="T", keys=["k1"], properties={"region": "eu"}))
    finally:
        await producer.close()

    account = {"SIEVEMQ_DASHBOARD_ACCESS_KEY": ADMIN[0], "SIEVEMQ_DASHBOARD_SECRET_KEY": ADMIN[1]}
    users = tmp_path / "dashboard-users.toml"
    users.write_text(USERS)
    signed = dashboard(cluster, ns, "signed", account, "--users-file", str(users))
    unsigned = dashboard(cluster, ns, "unsigned", {})

    explain = "explain?topic=Secured&expression=region%20%3D%20%27eu%27"
    assert get(f"{signed}/{explain}").status == 401, "the account's dashboard asks for a login"
    a = get(f"{signed}/{explain}", AS_OPS)
    assert a.status == 200, a.body
    assert a.json()["totals"]["matched"] == 1
    topics = get(f"{signed}/topics", AS_OPS).json()
    assert {t["topic"]: t["messages"] for t in topics["topics"]} == {"Secured": 1}
    assert get(f"{signed}/cluster", AS_OPS).json()["brokers"][0]["state"] == "serving"

    refused = get(f"{unsigned}/{explain}")
    assert refused.status == 502, refused.body
    err = refused.json()["error"]
    assert err["reason"] == "ACL_NO_CREDENTIALS" and err["code"] == 16, err
    (row,) = get(f"{unsigned}/topics").json()["topics"]
    assert row["errors"] and "broker-a" in row["errors"], row
    (broker,) = get(f"{unsigned}/cluster").json()["brokers"]
    assert broker["state"] == "refused" and broker["reason"] == "ACL_NO_CREDENTIALS", broker
    async with AdminClient(ns.addr) as anonymous:  # the CLI's `cluster status` without an account: the same answer
        (row,) = await anonymous.cluster_status()
    assert (row["state"], row["code"], row["reason"]) == ("refused", 16, "ACL_NO_CREDENTIALS"), row


def test_a_dashboard_with_an_account_and_no_users_file_does_not_start(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")},
           "SIEVEMQ_DASHBOARD_ACCESS_KEY": ADMIN[0], "SIEVEMQ_DASHBOARD_SECRET_KEY": ADMIN[1]}  # fmt: skip
    res = subprocess.run([sys.executable, "-m", "sievemq.cli", "dashboard", "--http-port", str(free_port())],
                         env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode != 0, res.stdout
    assert "usersFile" in res.stderr and "authEnable false" in res.stderr, res.stderr


def _login_line(log: str) -> str:
    (line,) = [x for x in log.splitlines() if x.strip().startswith("login ")]
    return line


def _dev_answer(dev: Proc, path: str, token: str | None = None) -> Answer:
    return get(f"{dev.extra['http']}/api/{path}", {"Authorization": f"Bearer {token}"} if token else {})


def test_dev_with_acl_asks_for_the_token_it_prints(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    (tmp_path / "broker.toml").write_text(f'aclEnable = true\naclFile = "{acl}"\n')
    dev = dev_proc(tmp_path, "--config", str(tmp_path / "broker.toml"))
    dev.env.update({"SIEVEMQ_DASHBOARD_ACCESS_KEY": ADMIN[0], "SIEVEMQ_DASHBOARD_SECRET_KEY": ADMIN[1]})
    dev.start()
    try:
        match = re.search(r"token (\S+)", _login_line(dev.log()))
        assert match, dev.log()
        token = match.group(1)
        users = tmp_path / "dev-data" / "dashboard-users.toml"
        assert stat.S_IMODE(users.stat().st_mode) == 0o600
        text = users.read_text()
        assert token not in text and hashlib.sha256(token.encode()).hexdigest() in text
        for path in ("topics", "cluster", "info", "messages/by-time?topic=TBW102&begin=0&end=1"):
            err = _dev_answer(dev, path).json()["error"]
            assert err["reason"] == "AUTH_REQUIRED", (path, err)
            assert _dev_answer(dev, path, token + "x").json()["error"]["reason"] == "AUTH_FAILED", path
        info = _dev_answer(dev, "info", token).json()
        assert info["auth"]["user"] == {"name": "admin", "role": "admin", "readBodies": True}
        (broker,) = _dev_answer(dev, "cluster", token).json()["brokers"]
        assert broker["state"] == "serving", "the dashboard signs with its account"

        dev.stop()
        before = len(dev.log())
        dev.start()
        again = dev.log()[before:]
        assert token not in again, "the token is printed once"
        assert str(users) in _login_line(again)
        assert _dev_answer(dev, "info", token).json()["auth"]["user"]["name"] == "admin"
    finally:
        dev.stop()
