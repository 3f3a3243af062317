"""A seeded generator of hostile remoting frames: garbage, bad lengths, bad headers, and requests of every code
with wrong types, out-of-range numbers, hostile names and odd bodies. Pure: bytes out, no I/O.

``clean`` frames are well framed with a header that decodes (JSON or ROCKETMQ binary): a server must answer
each of them (unless one-way) and keep the connection open. ``dirty`` frames may not decode at all: a server may
close the connection, and must go on serving everyone else.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.remoting.command import RemotingCommand, SerializeType, encode

FUZZ_TOPICS = [f"FzTopic{i}" for i in range(12)]
"""Legal names the fuzzer uses: few, so that auto-created topics stay few (each has queues and files)."""
FUZZ_GROUPS = [f"FzGroup{i}" for i in range(8)]
HOSTILE_NAMES = [
    "..",
    ".",
    "/x",
    "../x",
    "a/../..",
    "/",
    "a\x00b",
    "\x00",
    "x" * 300,
    "",
    " ",
    "a b",
    "名字",
    "%RETRY%../..",
    "a\nb",
    "FzTopic0\n",
    "\\..\\..",
    "C:\\x",
    "~",
    "$(id)",
]
BIG_NUMBERS = ["10" + "0" * 30, str(2**31), str(-(2**31) - 1), str(2**63), str(-(2**63) - 1), "-1", "1e308",
               "nan", "inf", "0x10", "1.5", "", "null", "true", "9" * 5000, "-0"]  # fmt: skip

NAME_FIELDS = ["topic", "consumerGroup", "producerGroup", "group", "groupName", "defaultTopic", "originTopic",
               "brokerName", "clusterName"]  # fmt: skip
INT_FIELDS = ["queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset", "suspendTimeoutMillis", "subVersion",
              "perm", "readQueueNums", "writeQueueNums", "topicSysFlag", "offset", "timestamp", "maxNum",
              "beginTimestamp", "endTimestamp", "bornTimestamp", "flag", "reconsumeTimes", "maxReconsumeTimes",
              "delayLevel", "brokerId", "defaultTopicQueueNums", "classCRC"]  # fmt: skip

OTHER_FIELDS = ["properties", "subscription", "expressionType", "key", "msgId", "clientID", "className",
                "filterServerAddr", "haServerAddr", "brokerAddr", "namespace", "value", "bodyCrc32", "compressed",
                "batch", "unitMode", "zz"]  # fmt: skip
BROKER_CODES = [10, 11, 12, 14, 15, 17, 21, 23, 28, 29, 30, 31, 32, 33, 34, 35, 36, 38, 41, 42, 46, 200, 201, 207, 215,
                301, 310, 320, 30010, 30011, 30012]  # fmt: skip
NAMESRV_CODES = [100, 101, 102, 103, 104, 105, 106, 206, 216, 219, 322]
UNKNOWN_CODES = [0, -1, 9, 37, 39, 999, 32767, -32768, 30099, 1 << 20]


@dataclass(frozen=True)
class Frame:
    """One frame to send; ``expect_answer`` for clean, non-one-way requests."""

    data: bytes
    clean: bool
    opaque: int = 0
    expect_answer: bool = False
    code: int = 0
    held: bool = False
    """A pull that may be held (long polling) before it is answered."""


class FrameFactory:
    """``next()`` gives frames of every kind, reproducibly for one seed."""

    def __init__(self, seed: int, codes: list[int]) -> None:
        self.rnd = random.Random(seed)
        self.codes = codes
        self._opaque = 1

    # ------------------------------------------------------------------------------------------ values
    def name(self) -> str:
        r = self.rnd.random()
        if r < 0.45:
            return self.rnd.choice(HOSTILE_NAMES)
        return self.rnd.choice(FUZZ_TOPICS if r < 0.75 else FUZZ_GROUPS)

    def number(self) -> Any:
        r = self.rnd.random()
        if r < 0.4:
            return self.rnd.choice(BIG_NUMBERS)
        if r < 0.6:
            return self.rnd.randint(-5, 40)
        if r < 0.8:
            return self.rnd.randint(-(2**63), 2**63 - 1)
        return self.rnd.choice([True, False, [1], {"a": 1}, 1.25, None, "abc"])

    def junk_value(self) -> Any:
        return self.rnd.choice([self.name(), self.number(), "x" * self.rnd.randint(0, 3000), "\x01\x02", "{", "[]"])

    def plausible(self, code: int) -> dict[str, Any]:
        """Fields a real client would send for ``code`` (legal names, small numbers)."""
        t, g = self.rnd.choice(FUZZ_TOPICS), self.rnd.choice(FUZZ_GROUPS)
        q = self.rnd.randint(0, 7)
        common = {"topic": t, "consumerGroup": g, "queueId": q}
        by_code: dict[int, dict[str, Any]] = {
            10: {"producerGroup": g, "topic": t, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4, "queueId": q,
                 "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "properties": "TAGS\x01a\x02", "reconsumeTimes": 0},
            310: {"a": g, "b": t, "c": "TBW102", "d": 4, "e": q, "f": 0, "g": 1, "h": 0, "i": "", "j": 0},
            320: {"a": g, "b": t, "c": "TBW102", "d": 4, "e": q, "f": 0, "g": 1, "h": 0, "i": "", "j": 0, "m": True},
            11: {**common, "queueOffset": self.rnd.randint(0, 50), "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0,
                 "suspendTimeoutMillis": 0, "subscription": self.rnd.choice(["*", "a || b", "a > 1"]),
                 "expressionType": self.rnd.choice(["TAG", "SQL92"]), "subVersion": 1},
            12: {"topic": t, "key": "k", "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2**62},
            14: common, 15: {**common, "commitOffset": self.rnd.randint(0, 99)},
            17: {"topic": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG"},
            29: {"topic": t, "queueId": q, "timestamp": 1}, 30: {"topic": t, "queueId": q},
            31: {"topic": t, "queueId": q}, 32: {"topic": t, "queueId": q}, 33: {"offset": self.rnd.randint(0, 9999)},
            35: {"clientID": "c1", "producerGroup": g, "consumerGroup": g}, 36: {"offset": 0, "group": g,
                 "delayLevel": 1, "originTopic": t, "maxReconsumeTimes": 2}, 38: {"consumerGroup": g},
            207: {"groupName": g}, 215: {"topic": t}, 30010: {"group": g}, 30011: {"group": g},
            30012: {"topic": t, "expression": "a > 1"},
            105: {"topic": t}, 216: {"topic": t}, 103: {"brokerName": "fzbroker", "brokerAddr": "127.0.0.1:1",
                  "clusterName": "FzCluster", "brokerId": 0, "haServerAddr": ""},
            104: {"brokerName": "fzbroker", "brokerAddr": "127.0.0.1:1", "clusterName": "FzCluster", "brokerId": 0},
            100: {"namespace": "fz", "key": "k", "value": "v"}, 101: {"namespace": "fz", "key": "k"},
        }  # fmt: skip
        return dict(by_code.get(code, common))

    def fields(self, code: int) -> dict[str, Any]:
        if self.rnd.random() < 0.45:  # a real request with one or two hostile values
            f = self.plausible(code)
            for _ in range(self.rnd.randint(0, 2)):
                if f:
                    key = self.rnd.choice(list(f))
                    f[key] = self.name() if isinstance(f[key], str) else self.number()
            return f
        f: dict[str, Any] = {}
        for key in self.rnd.sample(NAME_FIELDS, self.rnd.randint(0, 4)):
            f[key] = self.name()
        for key in self.rnd.sample(INT_FIELDS, self.rnd.randint(0, 6)):
            f[key] = self.number()
        if code in (310, 320):  # one-letter keys of SEND_MESSAGE_V2
            for key in self.rnd.sample("abcdefghijklmn", self.rnd.randint(0, 8)):
                f[key] = self.junk_value()
        if code == 11 and self.rnd.random() < 0.5:
            f["suspendTimeoutMillis"] = self.rnd.choice([0, 10, 500, 2**40, -5])
            f["sysFlag"] = self.rnd.choice([0, 2, 3, 7, 15, 2**40])
        for _ in range(self.rnd.randint(0, 3)):
            f[self.rnd.choice(OTHER_FIELDS)] = self.junk_value()
        return f

    def body(self, code: int) -> bytes:
        r = self.rnd.random()
        if r < 0.25:
            return b""
        if r < 0.45:
            return self.rnd.randbytes(self.rnd.randint(1, 4096))
        if r < 0.85:
            return orjson.dumps(self.json_doc(code))
        return self.batch_body()

    def json_doc(self, code: int) -> Any:
        mq = {"topic": self.name(), "brokerName": self.rnd.choice(["broker-x", "..", 5]), "queueId": self.number()}
        docs: list[Any] = [
            {"clientID": self.junk_value(), "consumerDataSet": [{"groupName": self.name(), "subscriptionDataSet": [
                {"topic": self.name(), "subString": self.junk_value(), "expressionType": self.rnd.choice(
                    ["TAG", "SQL92", "BOGUS", 3]), "subVersion": self.number()}]}],
             "producerDataSet": [{"groupName": self.name()}]},
            {"consumerGroup": self.name(), "clientId": self.junk_value(), "mqSet": [mq] * self.rnd.randint(0, 3)},
            {"consumerGroup": self.name(), "clientId": "c", "mqSet": self.junk_value()},
            {"groupName": self.name(), "retryQueueNums": self.number(), "retryMaxTimes": self.number(),
             "consumeEnable": self.junk_value(), "brokerId": self.number()},
            {"group": self.name(), "clientId": "c", "subscriptionData": {"topic": self.name(), "subString":
             self.rnd.choice(["a > 1", "((((", "a = '1'", "*"]), "expressionType": "SQL92"}},
            {"topicConfigSerializeWrapper": {"topicConfigTable": {self.name(): {"topicName": self.name(), "perm":
             self.number(), "readQueueNums": self.number(), "writeQueueNums": self.number(), "topicSysFlag":
             self.number()}}, "dataVersion": {"counter": self.number(), "timestamp": self.number()}},
             "filterServerList": [self.junk_value()]},
            [1, 2, 3],
            "string",
            None,
            {"a": {"b": {"c": [None] * 50}}},
        ]  # fmt: skip
        return self.rnd.choice(docs)

    def batch_body(self) -> bytes:
        out = b""
        for _ in range(self.rnd.randint(1, 4)):
            body = self.rnd.randbytes(self.rnd.randint(0, 64))
            props = self.rnd.choice([b"", b"TAGS\x01a\x02", b"\x01\x02\x01", self.rnd.randbytes(20)])
            total = self.rnd.choice([4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props), self.rnd.randint(-10, 100)])
            out += struct.pack(">iiiii", total, 0, 0, self.rnd.choice([0, 1, 2**31 - 1]), len(body)) + body
            out += struct.pack(">h", len(props)) + props
        return out

    # ------------------------------------------------------------------------------------------ frames
    def next(self) -> Frame:
        r = self.rnd.random()
        if r < 0.70:
            return self.request()
        if r < 0.78:
            return self.binary_request()
        if r < 0.86:
            return Frame(self.bad_json_header(), clean=False)
        if r < 0.93:
            return Frame(self.bad_length(), clean=False)
        return Frame(self.rnd.randbytes(self.rnd.randint(1, 600)), clean=False)

    def _code(self) -> int:
        return self.rnd.choice(self.codes) if self.rnd.random() < 0.93 else self.rnd.choice(UNKNOWN_CODES)

    def _command(self) -> RemotingCommand:
        code = self._code()
        self._opaque += 1
        oneway = self.rnd.random() < 0.03
        cmd = RemotingCommand.request(code, self.fields(code), self.body(code), oneway=oneway)
        cmd.opaque = self._opaque
        cmd.version = self.rnd.choice([0, 63, 121, 409, -1, 32767])
        cmd.language = self.rnd.choice(["JAVA", "CPP", "PYTHON", "GO"])
        return cmd

    def _frame_of(self, cmd: RemotingCommand) -> Frame:
        held = cmd.code == 11
        return Frame(encode(cmd), clean=True, opaque=cmd.opaque, expect_answer=not cmd.is_oneway, code=cmd.code,
                     held=held)  # fmt: skip

    def request(self) -> Frame:
        return self._frame_of(self._command())

    def binary_request(self) -> Frame:
        cmd = self._command()
        if -(2**15) <= cmd.code < 2**15:  # the binary header's code is 16 bits
            cmd.serialize_type = SerializeType.ROCKETMQ
        return self._frame_of(cmd)

    def bad_json_header(self) -> bytes:
        header = self.rnd.choice([
            b"{", b"[]", b"null", b"{\"code\": \"x\"}", b"{\"code\": 1e400}", b"{\"code\": 10, \"extFields\": [1]}",
            b"{\"code\": 10, \"flag\": \"a\"}", b"\xff\xfe", b"{\"code\": 99999999999999999999999}",
            orjson.dumps({"code": 10, "extFields": {"topic": {"nested": [1, 2]}}, "opaque": "o"}),
            self.rnd.randbytes(self.rnd.randint(0, 200)),
        ])  # fmt: skip
        body = self.rnd.randbytes(self.rnd.randint(0, 64))
        return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body

    def bad_length(self) -> bytes:
        kind = self.rnd.randint(0, 4)
        if kind == 0:
            return struct.pack(">i", self.rnd.choice([-1, 0, 1, 3, -(2**31)])) + b"\x00" * 8
        if kind == 1:
            return struct.pack(">ii", 64 * 1024 * 1024, 10) + b"x" * 32  # over the frame limit
        if kind == 2:
            return struct.pack(">ii", 20, 1000) + b"x" * 16  # header longer than the frame
        if kind == 3:
            return struct.pack(">ii", 20, (7 << 24) | 4) + b"x" * 16  # unknown serialize type
        return struct.pack(">ii", 12, 2) + b"{}" + b"\x00" * 6
