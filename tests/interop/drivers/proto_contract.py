#!/usr/bin/env python3
"""Compare sievemq's apache.rocketmq.v2 definitions with the real 5.x client's (run in .interop/venv-rmq5).

    proto_contract.py PROTO_DIR

Compiles PROTO_DIR/definition.proto and service.proto with grpcio-tools' protoc into descriptors and compares them,
message by message and field by field (names, numbers, types, labels, oneofs, maps, services), with the descriptors
``rocketmq-python-client`` ships (``rocketmq.grpc_protocol``). File options and JSON names are left out (they do not
travel). Prints one JSON object: ``{"files": {name: [differences]}}``; exit 0 when there are none.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import grpc_tools
from google.protobuf import descriptor_pb2 as d
from grpc_tools import protoc
from rocketmq.grpc_protocol import definition_pb2, service_pb2


def _strip(fd: d.FileDescriptorProto) -> d.FileDescriptorProto:
    fd.ClearField("options")
    fd.ClearField("source_code_info")

    def msg(m: Any) -> None:
        for f in m.field:
            f.ClearField("json_name")
        for n in m.nested_type:
            msg(n)

    for m in fd.message_type:
        msg(m)
    return fd


def _diffs(theirs: d.FileDescriptorProto, ours: d.FileDescriptorProto) -> list[str]:
    out: list[str] = []
    t = {m.name: m for m in theirs.message_type}
    o = {m.name: m for m in ours.message_type}
    out += [f"message {n} missing" for n in sorted(set(t) - set(o))]
    out += [f"message {n} extra" for n in sorted(set(o) - set(t))]
    out += [f"message {n} differs" for n in sorted(set(t) & set(o)) if t[n] != o[n]]
    te = {e.name: e for e in theirs.enum_type}
    oe = {e.name: e for e in ours.enum_type}
    out += [f"enum {n} differs or is missing" for n in sorted(te) if te[n] != oe.get(n)]
    if list(theirs.service) != list(ours.service):
        out.append("services differ")
    if not out and theirs != ours:
        out.append("files differ (order or dependencies)")
    return out


def main(proto_dir: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        args = ["protoc", f"-I{proto_dir}", f"-I{include}", f"--descriptor_set_out={out}", "definition.proto",
                "service.proto"]  # fmt: skip
        if protoc.main(args) != 0:
            print(json.dumps({"error": "protoc failed on sievemq's definitions"}))
            return 1
        fds = d.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    ours = {f.name: _strip(f) for f in fds.file}
    report: dict[str, list[str]] = {}
    for mod in (definition_pb2, service_pb2):
        theirs = d.FileDescriptorProto()
        mod.DESCRIPTOR.CopyToProto(theirs)
        mine = ours.get(theirs.name)
        report[theirs.name] = ["file missing"] if mine is None else _diffs(_strip(theirs), mine)
    print(json.dumps({"files": report}))
    return 1 if any(report.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
