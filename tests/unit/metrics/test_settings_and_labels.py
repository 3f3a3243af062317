"""The HTTP settings of each role (derived ports, errors), the proxy's bounded labels, the broker's filter rows,
a registry refusing two roles that export one family, and the connections closed by each limit."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric

from sievemq.broker.config import BrokerConfig
from sievemq.broker.filter_manager import FilterCounts
from sievemq.broker.metrics.collectors import filter_outcomes
from sievemq.errors import ConfigError
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.http.settings import derived_problem, http_port
from sievemq.metrics.loop_lag import LagStats
from sievemq.metrics.process import RoleMetrics, build_registry
from sievemq.namesrv.config import NamesrvConfig
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.metrics import GrpcStats, code_label, method_label
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc


def test_default_ports_follow_the_listen_port_and_never_collide_on_one_host() -> None:
    ns, broker, proxy = NamesrvConfig(), BrokerConfig(), ProxyConfig()
    ports = {
        "namesrv": http_port("namesrv", ns.http_listen_port, ns.listen_port),
        "broker": http_port("broker", broker.http_listen_port, broker.listen_port),
        "proxy": http_port("proxy", proxy.http_listen_port, proxy.listen_port),
    }
    assert ports == {"namesrv": 9877, "broker": 10913, "proxy": 8080}
    taken = {ns.listen_port, broker.listen_port, broker.ha_port, broker.listen_port - 2, proxy.listen_port}
    assert not taken & set(ports.values()), "an HTTP port on another role's port"
    assert http_port("filtersrv", FiltersrvConfig().http_listen_port, 0) is None, "a filter server has none by default"
    assert http_port("broker", -1, 10921) == 10923, "a second broker on the host moves its HTTP port along"


def test_zero_is_off_a_given_port_is_kept_and_an_ephemeral_listen_port_gives_an_ephemeral_one() -> None:
    assert http_port("broker", 0, 10911) is None
    assert http_port("broker", 9100, 10911) == 9100
    assert http_port("namesrv", -1, 0) == 0


def test_a_derived_port_out_of_range_is_none_and_says_why() -> None:
    assert NamesrvConfig(listen_port=65535).listen_port == 65535, "a valid listen port stays valid"
    assert http_port("namesrv", -1, 65535) is None
    assert derived_problem("namesrv", -1, 65535) == (
        "no HTTP port: httpListenPort -1 means listenPort + 1, which is 65536 here; set httpListenPort "
        "(--http-listen-port) to a port in 1..65535"
    )
    assert http_port("proxy", -1, 1) is None and derived_problem("proxy", -1, 1) is not None
    assert derived_problem("namesrv", -1, 9876) is None and derived_problem("namesrv", 0, 65535) is None
    with pytest.raises(ConfigError, match="httpListenPort"):
        BrokerConfig(http_listen_port=-2)


def test_method_labels_are_the_services_methods_only() -> None:
    assert method_label("/apache.rocketmq.v2.MessagingService/SendMessage") == "SendMessage"
    assert method_label("/apache.rocketmq.v2.MessagingService/NoSuchMethod") == "(other)"
    assert method_label("/evil.Service/SendMessage") == "(other)"
    assert method_label("/" + "x" * 10_000) == "(other)"


def test_code_labels_name_the_v2_code_of_an_answer() -> None:
    assert code_label(svc.SendMessageResponse(status=pb.Status(code=pb.TOPIC_NOT_FOUND))) == "TOPIC_NOT_FOUND"
    assert code_label(svc.SendMessageResponse(status=pb.Status(code=pb.OK))) == "OK"
    assert code_label(svc.SendMessageResponse()) is None, "no status: the caller decides"
    assert code_label(svc.SendMessageResponse(status=pb.Status(code=12345))) == "(other)"  # type: ignore[arg-type]
    assert code_label(object()) is None


def test_grpc_stats_count_calls_and_time_unary_ones() -> None:
    stats = GrpcStats()
    stats.ended("SendMessage", "OK", 0.002)
    stats.ended("SendMessage", "OK", 0.003)
    stats.ended("ReceiveMessage", "OK")
    assert stats.calls == {("SendMessage", "OK"): 2, ("ReceiveMessage", "OK"): 1}
    assert set(stats.latency) == {"SendMessage"} and stats.latency["SendMessage"].count == 2


def test_filter_rows_by_kind_and_outcome() -> None:
    c = FilterCounts(tag_matched=3, filtered_by_tag=7, filtered_by_bitmap=5, sql_matched=2, filtered_by_evaluation=1,
                     evaluation_errors=4)  # fmt: skip
    assert filter_outcomes(c) == [
        ("tag", "matched", 3),
        ("tag", "filtered_out", 7),
        ("bitmap", "filtered_out", 5),
        ("sql", "matched", 2),
        ("sql", "filtered_out", 1),
        ("sql", "error", 4),
    ]
    assert filter_outcomes(FilterCounts(tag_matched=1)) == [("tag", "matched", 1)], "zero rows are left out"
    assert c.matched == 5 and c.as_dict()["matched"] == 5, "the admin view still sees one matched count"


class _Fixed:
    def __init__(self, name: str) -> None:
        self.name = name

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(self.name, "a test family", value=1)


def test_a_process_registry_refuses_two_roles_exporting_one_family() -> None:
    build_registry([RoleMetrics("a", [_Fixed("sievemq_a")]), RoleMetrics("b", [_Fixed("sievemq_b")])], LagStats())
    with pytest.raises(ValueError, match="sievemq_same"):
        build_registry([RoleMetrics("a", [_Fixed("sievemq_same")]), RoleMetrics("b", [_Fixed("sievemq_same")])],
                       LagStats())  # fmt: skip


def test_connections_closed_by_a_limit_are_counted_per_role_and_reason() -> None:
    from prometheus_client import generate_latest

    closed = {"peer_cap": 3, "partial_budget": 1}
    registry = build_registry([RoleMetrics("broker", [], lambda: 2, closed.copy), RoleMetrics("proxy")], LagStats())
    text = generate_latest(registry).decode()
    assert 'sievemq_connections_closed_total{reason="partial_budget",role="broker"} 1.0' in text
    assert 'sievemq_connections_closed_total{reason="peer_cap",role="broker"} 3.0' in text
    assert 'role="proxy"' not in text.split("sievemq_connections_closed_total")[-1]


@pytest.mark.parametrize(("host", "url"), [("127.0.0.1", "http://127.0.0.1:8080"), ("", "http://127.0.0.1:8080"),
                                           ("0.0.0.0", "http://127.0.0.1:8080"), ("::1", "http://[::1]:8080"),
                                           ("10.0.0.7", "http://10.0.0.7:8080")])  # fmt: skip
def test_the_printed_url_is_one_a_person_can_open(host: str, url: str) -> None:
    from prometheus_client import CollectorRegistry

    from sievemq.http.server import HttpServer

    assert HttpServer(host, 8080, CollectorRegistry()).url == url  # not started: no socket
