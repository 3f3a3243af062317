"""Whether a topic exists before a command acts on it (``topic delete`` of a missing topic says so)."""

from __future__ import annotations

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.fanout import fan_out
from sievemq.protocol import mq_json
from sievemq.remoting.codes import RequestCode

__all__ = ["topic_holders"]


async def topic_holders(admin: AdminClient, topic: str, cluster: str | None = None) -> list[str]:
    """Names of the masters (of ``cluster``) that hold ``topic`` (GET_TOPIC_NAME_LIST), plus ``namesrv`` when
    the name servers list it; empty when nobody has it."""
    masters = [b for b in await admin.brokers() if 0 in b.addrs and (not cluster or b.cluster == cluster)]

    async def holds(b: BrokerInfo) -> bool:
        resp = await admin.call(b.addrs[0], RequestCode.GET_TOPIC_NAME_LIST)
        return topic in (mq_json.loads(resp.body).get("topicList") or [])

    answers, _ = await fan_out(masters, holds)
    holders = [name for name, held in answers.items() if held]
    if topic in await admin.topic_list():
        holders.append("namesrv")
    return holders
