"""``sievemq acl`` (docs/acl2.md §9) as a user runs it (subprocesses) against a real broker with ACL 2.0 on
(authenticationEnabled, authorizationEnabled, initAuthenticationUser): users and policies created, read, changed
and deleted on one broker (``-b``) and on every master of the cluster (``-c``), passwords never printed, values
refused before anything is sent (exit 2), the broker's refusals exit 1; and ``acl migrate plain_acl.yml``, printed
and then applied (a user the broker has is left as it is)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import Proc, broker_proc, namesrv_proc

ROOT = ("rootadmin", "root-password")
CLUSTER = "AclCliCluster"


class Site:
    """The name server and the ACL 2.0 broker of the module."""

    def __init__(self, ns: Proc, broker: Proc) -> None:
        self.ns = ns
        self.broker = broker

    def run(self, *args: str, signed: bool = True, stdin: str | None = None) -> tuple[int, str, str]:
        """``sievemq ARGS`` (signed as the super user) -> (exit code, stdout, stderr)."""
        keys = ["--access-key", ROOT[0], "--secret-key", ROOT[1]] if signed else []
        argv = [sys.executable, "-m", "sievemq.cli", *args, "-n", self.ns.addr, *keys]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(self.broker.log_path.parent)})  # fmt: skip
        return done.returncode, done.stdout, done.stderr

    def ok(self, *args: str, stdin: str | None = None) -> str:
        code, out, err = self.run(*args, stdin=stdin)
        assert code == 0, f"exit {code}\nout: {out}\nerr: {err}"
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("acl-cli")
    ns = namesrv_proc(tmp, "ns-acl-cli")
    init = json.dumps({"username": ROOT[0], "password": ROOT[1]})
    broker = broker_proc(tmp, ns.addr, "acl-cli-a", "--authentication-enabled", "true", "--authorization-enabled",
                         "true", "--init-authentication-user", init, "--broker-cluster-name", CLUSTER)  # fmt: skip
    ns.start()
    try:
        broker.start()
        s = Site(ns, broker)
        for _ in range(100):  # the broker registers with the name server (-c finds it there)
            if s.run("acl", "user", "list", "-c", CLUSTER)[0] == 0:
                break
        else:
            raise AssertionError("the broker never answered `sievemq acl user list -c` (registered?)")
        yield s
    finally:
        broker.stop()
        ns.stop()


def test_users(site: Site) -> None:
    b = ("-b", site.broker.addr)
    assert "user alice created on" in site.ok("acl", "user", "create", "-u", "alice", "-p", "alice-password", *b)
    site.ok("acl", "user", "create", "-u", "bob", "--password-stdin", "-t", "Normal", "-c", CLUSTER,
            stdin="bob-password\n")  # fmt: skip
    doc = site.json("acl", "user", "get", "-u", "alice", *b)
    assert doc == {"brokers": {site.broker.addr: {"username": "alice", "userType": "Normal", "userStatus": "enable"}},
                   "errors": {}}  # fmt: skip
    listed = site.json("acl", "user", "list")
    assert {u["username"] for u in listed["brokers"][site.broker.addr]} == {ROOT[0], "alice", "bob"}
    table = site.ok("acl", "user", "list", "-f", "ali")
    assert "alice" in table and "bob" not in table
    for out in (json.dumps(listed), table, site.ok("acl", "user", "get", "-u", "alice")):
        assert "alice-password" not in out and ROOT[1] not in out and "password" not in out

    site.ok("acl", "user", "update", "-u", "bob", "-s", "disable", *b)
    assert site.json("acl", "user", "get", "-u", "bob")["brokers"][site.broker.addr]["userStatus"] == "disable"

    code, out, err = site.run("acl", "user", "create", "-u", "alice", "-p", "again", *b)  # exists: the broker's 29
    assert code == 1 and "alice" in err, (out, err)
    code, _, err = site.run("acl", "user", "create", "-u", "bad:name", "-p", "x", *b)  # refused before sending
    assert code == 2 and "--username" in err
    code, _, err = site.run("acl", "user", "update", "-u", "bob", *b)
    assert code == 2 and "nothing to change" in err
    code, _, err = site.run("acl", "user", "get", "-u", "nobody", *b)
    assert code == 1 and "does not exist" in err
    code, _, err = site.run("acl", "user", "list", *b, signed=False)  # the broker refuses an unsigned request
    assert code == 1 and site.broker.addr in err
    code, _, err = site.run("acl", "user", "list", "-c", "NoSuchCluster")
    assert code == 1 and "NoSuchCluster" in err

    site.ok("acl", "user", "delete", "-u", "bob", "-c", CLUSTER)
    assert "bob" not in site.ok("acl", "user", "list")


def test_policies(site: Site) -> None:
    b = ("-b", site.broker.addr)
    site.ok("acl", "user", "create", "-u", "carol", "-p", "carol-password", *b)
    out = site.ok("acl", "policy", "create", "-s", "User:carol", "-r", "Topic:orders,Group:g1", "-a", "Pub,Sub",
                  "-i", "10.0.0.0/8", "-d", "Allow", *b)  # fmt: skip
    assert "2 entries of User:carol created" in out
    site.ok("acl", "policy", "update", "-s", "User:carol", "-r", "Topic:ord*", "-a", "All", "-d", "deny", "-c", CLUSTER)
    site.ok("acl", "policy", "create", "-s", "User:carol", "-r", "Topic:*", "-a", "Sub", "-d", "Allow",
            "--policy-type", "Default")  # fmt: skip
    doc = site.json("acl", "policy", "get", "-s", "User:carol", *b)["brokers"][site.broker.addr]
    assert doc["subject"] == "User:carol"
    entries = {(p["policyType"], e["resource"]): e for p in doc["policies"] for e in p["entries"]}
    assert entries[("Custom", "Topic:orders")] == {"resource": "Topic:orders", "actions": ["Pub", "Sub"],
                                                   "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}  # fmt: skip
    assert entries[("Custom", "Topic:ord*")]["decision"] == "Deny"
    assert entries[("Default", "Topic:*")]["actions"] == ["Sub"]
    assert set(entries) == {("Custom", "Topic:orders"), ("Custom", "Group:g1"), ("Custom", "Topic:ord*"),
                            ("Default", "Topic:*")}  # fmt: skip
    listed = site.json("acl", "policy", "list", "-s", "carol", "-r", "Group")["brokers"][site.broker.addr]
    assert [e["resource"] for i in listed for p in i["policies"] for e in p["entries"]] == ["Group:g1"]
    table = site.ok("acl", "policy", "list", "-s", "carol")
    assert "Topic:orders" in table and "10.0.0.0/8" in table

    code, _, err = site.run("acl", "policy", "create", "-s", "User:carol", "-r", "Queue:x", "-a", "Pub", "-d", "Allow")
    assert code == 2, err
    code, _, err = site.run("acl", "policy", "create", "-s", "User:carol", "-r", "Topic:x", "-a", "Any", "-d", "Allow")
    assert code == 2, err
    code, _, err = site.run("acl", "policy", "create", "-s", "User:nobody", "-r", "Topic:x", "-a", "Pub", "-d",
                            "Allow", *b)  # fmt: skip
    assert code == 1 and "nobody" in err, err

    site.ok("acl", "policy", "delete", "-s", "User:carol", "-r", "Topic:orders", *b)
    site.ok("acl", "policy", "delete", "-s", "User:carol", "-r", "Topic:*", "--policy-type", "Default", *b)
    doc = site.json("acl", "policy", "get", "-s", "User:carol", *b)["brokers"][site.broker.addr]
    assert {e["resource"] for p in doc["policies"] for e in p["entries"]} == {"Group:g1", "Topic:ord*"}
    site.ok("acl", "policy", "delete", "-s", "User:carol", *b)
    assert site.json("acl", "policy", "get", "-s", "User:carol", *b)["brokers"][site.broker.addr] is None
    site.ok("acl", "user", "delete", "-u", "carol", *b)


PLAIN_ACL = """
globalWhiteRemoteAddresses: ["10.10.*.*"]
accounts:
  - accessKey: planadmin
    secretKey: planadmin-secret
    admin: true
  - accessKey: planuser
    secretKey: planuser-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["orders=PUB|SUB", "audit=DENY"]
    groupPerms: ["billing=SUB"]
"""


def test_migrate(site: Site, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL)
    code, out, err = site.run("acl", "migrate", str(acl_file))
    assert code == 0, err
    assert "planadmin" in out and "Super" in out and "Topic:orders" in out and "Group:*" in out
    assert "secret" not in out + err
    plan = site.json("acl", "migrate", str(acl_file))
    assert plan["users"] == [{"username": "planadmin", "userType": "Super", "userStatus": "enable"},
                             {"username": "planuser", "userType": "Normal", "userStatus": "enable"}]  # fmt: skip
    (acl,) = plan["acls"]
    entries = {(p["policyType"], e["resource"]): (e["actions"], e["decision"]) for p in acl["policies"]
               for e in p["entries"]}  # fmt: skip
    assert entries == {("Custom", "Topic:orders"): (["Pub", "Sub"], "Allow"),
                       ("Custom", "Topic:audit"): (["All"], "Deny"),
                       ("Custom", "Group:billing"): (["Sub"], "Allow"),
                       ("Default", "Group:*"): (["Sub"], "Allow")}  # fmt: skip
    assert "planuser" not in site.ok("acl", "user", "list"), "printing the plan changes nothing"

    out = site.ok("acl", "migrate", str(acl_file), "--apply", "-c", CLUSTER)
    assert "created planadmin, planuser" in out, out
    got = site.json("acl", "user", "get", "-u", "planadmin")["brokers"][site.broker.addr]
    assert got["userType"] == "Super"
    policies = site.json("acl", "policy", "get", "-s", "User:planuser")["brokers"][site.broker.addr]
    assert {(p["policyType"], e["resource"]) for p in policies["policies"] for e in p["entries"]} == set(entries)

    # the migrated user signs requests with its plain ACL secret: it may read users (Super)
    code, out, err = site.run("acl", "user", "list", signed=False)
    assert code == 1
    argv = ["acl", "user", "get", "-u", "planuser", "--access-key", "planadmin", "--secret-key", "planadmin-secret"]
    code, out, err = site.run(*argv, signed=False)
    assert code == 0 and "planuser" in out, err

    site.ok("acl", "user", "update", "-u", "planuser", "-s", "disable")
    out = site.ok("acl", "migrate", str(acl_file), "--apply")
    assert "created no user; already there: planadmin, planuser" in out, out
    assert site.json("acl", "user", "get", "-u", "planuser")["brokers"][site.broker.addr]["userStatus"] == "disable"
    code, _, err = site.run("acl", "migrate", str(tmp_path / "missing.yml"))
    assert code != 0 and "missing.yml" in err
