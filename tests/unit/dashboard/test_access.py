"""The Access page's pure parts (docs/dashboard.md §9): the same-origin check of a write, the checks of its body,
the merged list of every broker's users and entries, and what a viewer gets of a trace (docs/traces.md §6)."""

from __future__ import annotations

import orjson
import pytest

from sievemq.admin.auth_ops import Acl2Off, AuthInvalid, Outcome, acl_body, public_user
from sievemq.auth.model import AuthError
from sievemq.dashboard.access import access_view, check_same_origin, parse_write
from sievemq.dashboard.errors import ApiError, error_of
from sievemq.dashboard.views import trace_view

JSON = "application/json"


def test_only_the_pages_own_json_writes_pass() -> None:
    assert check_same_origin(JSON, {}, "127.0.0.1:8080") is None  # a script (curl): no Origin
    own = {"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}
    assert check_same_origin(JSON, own, "127.0.0.1:8080") is None
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        err = check_same_origin(ctype, own, "127.0.0.1:8080")
        assert err is not None and (err.status, err.reason) == (415, "UNSUPPORTED_MEDIA_TYPE")
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "http://127.0.0.1:9999"},
                    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "cross-site"}):  # fmt: skip
        err = check_same_origin(JSON, headers, "127.0.0.1:8080")
        assert err is not None and (err.status, err.reason) == (403, "CROSS_SITE_REQUEST"), headers


def _refused(body: object) -> ApiError:
    with pytest.raises(ApiError) as e:
        parse_write(body if isinstance(body, bytes) else orjson.dumps(body))
    assert e.value.status == 400 and e.value.reason == "INVALID_PARAMETER"
    return e.value


def test_a_writes_body_is_checked_before_anything_is_sent() -> None:
    assert parse_write(b'{"action": "createUser", "username": "alice", "password": "pw", "userType": "super"}') == (
        "createUser", {"username": "alice", "password": "pw", "user_type": "Super"})  # fmt: skip
    assert parse_write(b'{"action": "deleteUser", "username": "alice"}') == ("deleteUser", {"username": "alice"})
    action, args = parse_write(orjson.dumps({"action": "createPolicy", "subject": "User:alice", "decision": "deny",
                                             "resources": "Topic:a, Group:g", "actions": ["sub", "Pub"]}))  # fmt: skip
    assert action == "createPolicy" and args["acl"] == {"subject": "User:alice", "policies": [
        {"policyType": "Custom", "entries": [
            {"resource": "Topic:a", "actions": ["Pub", "Sub"], "decision": "Deny"},
            {"resource": "Group:g", "actions": ["Pub", "Sub"], "decision": "Deny"}]}]}  # fmt: skip
    assert parse_write(b'{"action": "deletePolicy", "subject": "User:alice"}') == (
        "deletePolicy", {"subject": "User:alice", "resource": None, "policy_type": None})  # fmt: skip
    for body, field in ((b"", "body"), (b"null", "body"), (b"x" * 70_000, "body"), ({"action": 1}, "action"),
                        ({"action": "deleteUser"}, "username"),
                        ({"action": "deleteUser", "username": ["a"]}, "username"),
                        ({"action": "deleteUser", "username": "a", "password": "p"}, "password"),
                        ({"action": "createPolicy", "subject": "User:a", "resources": "Topic:a", "actions": "Any",
                          "decision": "Allow"}, "policy"),
                        ({"action": "createPolicy", "subject": "User:a", "resources": [1], "actions": "Pub",
                          "decision": "Allow"}, "resources"),
                        ({"action": "createPolicy", "subject": "User:a", "resources": ["Topic:a"] * 65,
                          "actions": "Pub", "decision": "Allow"}, "resources"),
                        ({"action": "deletePolicy", "subject": "User:a", "resource": "Queue:q"}, "resource"),
                        ({"action": "deletePolicy", "subject": "User:a", "policyType": "Other"},
                         "policyType")):  # fmt: skip
        assert _refused(body).extra["parameter"] == field, body


def test_acl_body_is_mqadmins_create_acl() -> None:
    body = acl_body("User:alice", ["Topic:orders", "*"], ["Pub", "All"], "allow", ["10.0.0.0/8"], "default")
    assert body == {"subject": "User:alice", "policies": [{"policyType": "Default", "entries": [
        {"resource": "Topic:orders", "actions": ["All", "Pub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"},
        {"resource": "*", "actions": ["All", "Pub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}]}]}  # fmt: skip
    for args in (("alice", ["Topic:a"], ["Pub"], "Allow"), ("User:a", [], ["Pub"], "Allow"),
                 ("User:a", ["Topic:a"], [], "Allow"), ("User:a", ["Topic:a"], ["Pub"], "Maybe")):  # fmt: skip
        with pytest.raises(AuthError):
            acl_body(*args)
    assert public_user({"username": "a", "password": "secret", "userType": "Normal"}) == {"username": "a",
                                                                                         "userType": "Normal"}


def test_every_brokers_users_and_entries_merged() -> None:
    entry = {"resource": "Topic:a", "actions": ["Pub"], "decision": "Allow"}
    acls = [{"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [entry]}]}]
    o = Outcome()
    o.results["b1:1"] = {"users": [{"username": "alice", "userType": "Normal", "userStatus": "enable"}], "acls": acls}
    o.results["b2:1"] = {"users": [{"username": "alice", "userType": "Normal", "userStatus": "disable"}], "acls": acls}
    o.errors["b3:1"] = AuthInvalid("b3:1", "no")
    view = access_view(["b1:1", "b2:1", "b3:1"], o)
    assert view["users"] == [{"username": "alice", "userType": "Normal", "userStatus": "enable",
                              "brokers": ["b1:1", "b2:1"], "differs": True}]  # fmt: skip
    assert view["policies"] == [{"subject": "User:alice", "policyType": "Custom", "resource": "Topic:a",
                                 "actions": ["Pub"], "sourceIps": [], "decision": "Allow", "brokers": ["b1:1", "b2:1"]}]
    assert view["enabled"] is True and view["errors"]["b3:1"]["reason"] == "ACL_INVALID"
    off = Outcome(errors={"b1:1": Acl2Off("b1:1")})
    assert access_view(["b1:1"], off)["enabled"] is False
    err = error_of(Acl2Off("b1:1"))
    assert err is not None and (err.status, err.reason) == (409, "ACL2_OFF")


def test_a_viewer_gets_no_property_value_of_a_trace() -> None:
    sql = {"verdict": "FILTERED", "stage": "evaluation", "reason": "the expression is FALSE",
           "details": {"properties": {"card": "4111"}, "result": "FALSE"}}
    failed = {"verdict": "FILTERED", "stage": "evaluation", "reason": "evaluation error: '4111' is not a number",
              "details": {"properties": {"card": "4111"}, "result": "ERROR"}}
    doc = {"msgId": "X", "groups": [{"group": "g1", "filter": sql}, {"group": "g2", "filter": failed},
                                    {"group": "g3", "filter": None}]}  # fmt: skip
    assert trace_view(doc, True) == {**doc, "contentHidden": False}
    hidden = trace_view(doc, False)
    assert hidden["contentHidden"] is True and b"4111" not in orjson.dumps(hidden)
    assert [g["filter"] and g["filter"]["verdict"] for g in hidden["groups"]] == ["FILTERED", "FILTERED", None]
    assert hidden["groups"][0]["filter"]["reason"] == "the expression is FALSE"


class _NoCluster:
    """A ``DashboardData`` stand-in: a write refused before it is asked fails the test if it reaches here."""

    async def access_write(self, *args: object) -> dict[str, object]:
        raise AssertionError("a refused write reached the cluster")


@pytest.mark.parametrize(("listen", "status", "reason"), [("0.0.0.0", 403, "WRITES_NEED_LOGINS"),
                                                          ("127.0.0.1", 400, "INVALID_PARAMETER")])  # fmt: skip
async def test_a_dashboard_without_logins_takes_writes_on_loopback_only(listen: str, status: int, reason: str) -> None:
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from sievemq.dashboard.app import dashboard_routes

    app = web.Application()
    app.add_routes(dashboard_routes(_NoCluster(), listen))  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        resp = await client.post("/api/access", data=b'{"action": "nothing"}',
                                 headers={"Content-Type": "application/json"})  # fmt: skip
        body = await resp.json()
        assert (resp.status, body["error"]["reason"]) == (status, reason), body
        resp = await client.post("/api/topics", data=b"{}", headers={"Content-Type": "application/json"})
        assert resp.status == 405
