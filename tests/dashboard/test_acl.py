"""The dashboard in front of brokers that check ACL (docs/dashboard.md §5): with an admin account from the
environment (SIEVEMQ_DASHBOARD_ACCESS_KEY / _SECRET_KEY) every view answers; without one, what the brokers refuse
is a 502 carrying the broker's reason, and the views that fan out list the refusing broker under ``errors``."""

from __future__ import annotations

from pathlib import Path

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from tests.dashboard.conftest import get
from tests.integration.conftest import Cluster, cluster  # noqa: F401  (the fixture)
from tests.integration.helpers import eventually
from tests.support.procs import Proc, free_port

ADMIN = ("dashAdmin1", "dashAdmin1-secret")
ACL = f"""
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""


def dashboard(cluster: Cluster, ns: Proc, name: str, env: dict[str, str]) -> str:  # noqa: F811
    port = free_port()
    proc = Proc(["dashboard", "--namesrv-addr", ns.addr, "--http-port", str(port)], port, cluster.tmp / f"{name}.log",
                ready_text="sievemq dashboard on", env=env)  # fmt: skip
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

    signed = dashboard(cluster, ns, "signed", {"SIEVEMQ_DASHBOARD_ACCESS_KEY": ADMIN[0],
                                               "SIEVEMQ_DASHBOARD_SECRET_KEY": ADMIN[1]})  # fmt: skip
    unsigned = dashboard(cluster, ns, "unsigned", {})

    explain = "explain?topic=Secured&expression=region%20%3D%20%27eu%27"
    a = get(f"{signed}/{explain}")
    assert a.status == 200, a.body
    assert a.json()["totals"]["matched"] == 1
    topics = get(f"{signed}/topics").json()
    assert {t["topic"]: t["messages"] for t in topics["topics"]} == {"Secured": 1}
    assert get(f"{signed}/cluster").json()["brokers"][0]["state"] == "serving"

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
