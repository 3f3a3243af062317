"""The README documents every setting and every request code sievemq answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from sievemq.config import BrokerConfig, NamesrvConfig, describe
from sievemq.dashboard.config import DashboardConfig
from sievemq.filtersrv.config import FiltersrvConfig
from sievemq.proxy.config import ProxyConfig

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("cls", [NamesrvConfig, BrokerConfig, FiltersrvConfig, ProxyConfig, DashboardConfig])
def test_every_setting_is_in_the_config_reference(cls: type) -> None:
    missing = [key for key, *_ in describe(cls) if f"| `{key}` |" not in README]
    assert not missing, f"README's configuration reference lacks {missing}"


def test_every_broker_and_namesrv_request_code_is_listed(tmp_path: Path) -> None:
    import asyncio

    from sievemq.broker.controller import BrokerController
    from sievemq.namesrv.controller import NamesrvController

    async def tables() -> tuple[list[int], list[int]]:
        ns = NamesrvController(NamesrvConfig(listen_port=0))
        broker = BrokerController(BrokerConfig(store_path_root_dir=str(tmp_path), namesrv_addr=""))
        return ns.server.table.codes(), broker.table.codes()

    ns_codes, broker_codes = asyncio.run(tables())
    section = README[README.index("## Protocol coverage") : README.index("## Layout")]
    missing = [c for c in ns_codes + broker_codes if f"{c} " not in section]
    assert not missing, f"README's protocol coverage lacks request codes {missing}"


def test_the_config_reference_is_the_generated_one() -> None:
    from sievemq.cli import reference_markdown

    assert reference_markdown() in README, "regenerate it: sievemq config-reference --markdown"
