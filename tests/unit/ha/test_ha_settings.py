"""The HA port's settings: where it listens, what it advertises, when it listens from the start."""

from __future__ import annotations

from pathlib import Path

import pytest

from sievemq.broker.config import BrokerConfig
from sievemq.errors import ConfigError
from sievemq.settings import load_config


def test_defaults_listen_on_demand_beside_the_remoting_port() -> None:
    c = BrokerConfig(listen_host="10.0.0.7", broker_ip="192.0.2.7", listen_port=20911)
    s = c.replication_settings()
    assert (s.host, s.ha_port, s.listen_at_start, s.ha_host, s.ticket_checks_address) == (
        "10.0.0.7", 20912, False, "192.0.2.7", True,
    )  # fmt: skip
    assert c.ha_address == "192.0.2.7:20912"  # registered as haServerAddr


def test_an_internal_ha_address() -> None:
    c = BrokerConfig(ha_listen_host="10.1.0.7", broker_ip2="10.1.0.7", ha_listen_port=30912,
                     ha_ticket_checks_address=False)  # fmt: skip
    s = c.replication_settings()
    assert (s.host, s.ha_port, s.listen_at_start, s.ha_host, s.ticket_checks_address) == (
        "10.1.0.7", 30912, True, "10.1.0.7", False,
    )  # fmt: skip
    assert c.ha_address == "10.1.0.7:30912"


def test_rocketmqs_key_brokerIP2_is_read(tmp_path: Path) -> None:
    (tmp_path / "broker.toml").write_text('brokerIP2 = "10.9.9.9"\nhaListenHost = "10.9.9.9"\n')
    c = load_config(BrokerConfig, tmp_path / "broker.toml", {})
    assert (c.broker_ip2, c.ha_listen_host, c.ha_address) == ("10.9.9.9", "10.9.9.9", "10.9.9.9:10912")


@pytest.mark.parametrize(
    ("key", "value"),
    [("ha_listen_host", "not a host!"), ("broker_ip2", "0.0.0.0"), ("broker_ip2", "broker.example"),
     ("broker_ip2", "::1")],
)  # fmt: skip
def test_bad_addresses_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig(**{key: value})  # type: ignore[arg-type]
    assert {"ha_listen_host": "haListenHost", "broker_ip2": "brokerIp2"}[key] in str(e.value)
