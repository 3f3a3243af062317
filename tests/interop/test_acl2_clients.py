"""The C++ core (rocketmq-client-python 0.5.0rc2, which also signs ``OnsChannel``) and ali-ons 3.12.0 against a
sievemq broker with ACL 2.0 (docs/acl2.md): the same user and policies as ``test_java_acl2.py`` (written with
RocketMQ 5.5.0's mqadmin), the same HMAC signatures as with the plain ACL. The user produces and consumes where its
policies allow; a wrong password is refused (ali-ons reports 16; the C++ core reports no code, so its refusal is
read from the broker's log, by its stable reason)."""

from __future__ import annotations

import pytest

from tests.compat.test_mqadmin_auth import Site
from tests.interop.clients import DriverResult, run_driver, start_driver, unique_name
from tests.interop.test_java_acl2 import DENIED_TOPIC, OK_TOPIC, USER, site

__all__ = ["site"]

pytestmark = pytest.mark.interop


def creds(kind: str, password: str = USER[1]) -> list[str]:
    """The user's credentials as each driver takes them (the C++ core also signs its channel, as ali-ons' default)."""
    base = ["--access-key", USER[0], "--secret-key", password]
    return [*base, "--channel", "ALIYUN"] if kind == "rmqcp" else base


def produce(kind: str, s: Site, topic: str, credentials: list[str], count: int = 2) -> DriverResult:
    extra = ["--retry-times", "0"] if kind == "ons" else []
    return run_driver(kind, ["produce", "--namesrv", s.ns.addr, "--topic", topic, "--group", unique_name("JA2P"),
                             "--count", str(count), *extra, *credentials])  # fmt: skip


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_the_user_produces_and_consumes_where_allowed(site: Site, kind: str) -> None:
    sent = produce(kind, site, OK_TOPIC, creds(kind), count=2)
    assert sent.ok and len(sent.of("sent")) == 2, sent.describe()
    with start_driver(kind, ["consume", "--namesrv", site.ns.addr, "--topic", OK_TOPIC, "--group",
                             unique_name("JA2C"), "--expr", "*", "--from", "first", "--expect", "2", "--timeout",
                             "90", *creds(kind)]) as c:  # fmt: skip
        assert c.wait(timeout=150) == 0, c.describe()
    assert {e["msg_id"] for e in sent.of("sent")} <= {e["msg_id"] for e in c.result().of("received")}, c.describe()


def test_ali_ons_is_refused_with_16(site: Site) -> None:
    for topic, credentials in ((OK_TOPIC, creds("ons", "wrong-password")), (DENIED_TOPIC, creds("ons"))):
        sent = produce("ons", site, topic, credentials, count=1)
        errors = sent.of("error")
        assert not sent.of("sent") and errors and errors[0].get("response_code") == 16, sent.describe()


def test_the_cpp_core_is_refused_a_wrong_password(site: Site) -> None:
    assert site.broker is not None
    start = len(site.broker.log())
    sent = produce("rmqcp", site, OK_TOPIC, creds("rmqcp", "wrong-password"), count=1)
    assert not sent.of("sent") and sent.errors, sent.describe()
    log = site.broker.log()[start:]
    assert "ACL_SIGNATURE" in log, log[-3000:]
    assert "wrong-password" not in log and USER[1] not in log
