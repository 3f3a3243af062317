"""``decide``'s shortcuts (a topic one client subscribes, expressions normalised once per call) give the verdicts the
plain rule gives: the first registered expression's holders are the group's, the others inconsistent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sievemq.broker.consistency import decide
from sievemq.protocol.heartbeat import Subscription

exprs = st.sampled_from(["*", "A", "A || B", "B||A", "a > 1", "C"])
kinds = st.sampled_from(["TAG", "SQL92"])
clients = st.dictionaries(st.sampled_from(["c1", "c2", "c3"]),
                          st.dictionaries(st.sampled_from(["T", "U", "V"]), st.tuples(exprs, kinds, st.integers(0, 5)),
                                          max_size=3), max_size=3)  # fmt: skip


@given(clients)
def test_verdicts_are_the_plain_rules(plan: dict[str, dict[str, tuple[str, str, int]]]) -> None:
    subs = {c: {t: Subscription(t, e, k) for t, (e, k, _) in ts.items()} for c, ts in plan.items()}
    seqs = {c: {t: n for t, (_, _, n) in ts.items()} for c, ts in plan.items()}
    verdicts = decide(subs, seqs)
    assert set(verdicts) == {t for ts in plan.values() for t in ts}
    for topic, v in verdicts.items():
        cids = [c for c in plan if topic in plan[c]]
        order = sorted(cids, key=lambda c: (seqs[c][topic], c))
        first_key = subs[order[0]][topic].expression_key()
        holders = [c for c in order if subs[c][topic].expression_key() == first_key]
        assert list(v.holders) == holders
        assert v.group_subscription is subs[holders[0]][topic]
        assert v.consistent == frozenset(holders)
        assert dict(v.inconsistent) == {c: subs[c][topic] for c in cids if c not in holders}
