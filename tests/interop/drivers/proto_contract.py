#!/usr/bin/env python3
"""Compare sievemq's apache.rocketmq.v2 definitions with the real 5.x clients' (run in .interop/venv-rmq5).

    proto_contract.py PROTO_DIR
    proto_contract.py PROTO_DIR --node NODE_PROTO_ROOT

Compiles PROTO_DIR/definition.proto and service.proto with grpcio-tools' protoc into descriptors and compares them,
message by message and field by field (names, numbers, types, labels, oneofs, maps, services), with the descriptors
``rocketmq-python-client`` ships (``rocketmq.grpc_protocol``): they must be equal. File options and JSON names are
left out (they do not travel). Prints one JSON object: ``{"files": {name: [differences]}}``; exit 0 when there are
none.

With ``--node``: with the .proto files the Node.js client ``rocketmq-client-nodejs`` bundles (its generated
``*_pb.js`` come from them), ``NODE_PROTO_ROOT/apache/rocketmq/v2/{definition,service}.proto``, compiled the same
way. Those are older than ours, so the contract is that everything they define is ours too, alike: each message
and its fields (number, label, type, oneof, proto3 optional, nested types), each enum value (number), each service
method (request, response, streaming). What only ours has is listed under ``"extra"`` (``{name: [what]}``); it does
not count as a difference.
"""

from __future__ import annotations

import json
import os
import re
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


def _compile(root: str, names: list[str]) -> dict[str, d.FileDescriptorProto] | None:
    """The descriptors of ``names`` (paths under ``root``) by protoc, keyed by their base names (None: protoc
    failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        if protoc.main(["protoc", f"-I{root}", f"-I{include}", f"--descriptor_set_out={out}", *names]) != 0:
            return None
        fds = d.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    return {os.path.basename(f.name): _strip(f) for f in fds.file}


def _field(f: Any, oneofs: list[str]) -> tuple[Any, ...]:
    oneof = oneofs[f.oneof_index] if f.HasField("oneof_index") else None
    return (f.number, f.label, f.type, f.type_name, oneof, f.proto3_optional)


def _subset_message(where: str, t: Any, o: Any, out: list[str], extra: list[str]) -> None:
    """Every field and nested type of ``t`` (theirs) is in ``o`` (ours), alike."""
    t_oneofs, o_oneofs = [x.name for x in t.oneof_decl], [x.name for x in o.oneof_decl]
    tf, of = {f.name: f for f in t.field}, {f.name: f for f in o.field}
    for name, f in tf.items():
        if name not in of:
            out.append(f"{where}.{name} missing")
        elif _field(f, t_oneofs) != _field(of[name], o_oneofs):
            out.append(f"{where}.{name} differs: theirs {_field(f, t_oneofs)}, ours {_field(of[name], o_oneofs)}")
    extra += [f"{where}.{n}" for n in sorted(set(of) - set(tf))]
    if t.options.map_entry != o.options.map_entry:
        out.append(f"{where} map entry differs")
    tn, on = {n.name: n for n in t.nested_type}, {n.name: n for n in o.nested_type}
    for name, n in tn.items():
        if name in on:
            _subset_message(f"{where}.{name}", n, on[name], out, extra)
        else:
            out.append(f"message {where}.{name} missing")
    extra += [f"message {where}.{n}" for n in sorted(set(on) - set(tn))]
    _subset_enums(where + ".", list(t.enum_type), list(o.enum_type), out, extra)


def _subset_enums(prefix: str, theirs: list[Any], ours: list[Any], out: list[str], extra: list[str]) -> None:
    o = {e.name: e for e in ours}
    for e in theirs:
        if e.name not in o:
            out.append(f"enum {prefix}{e.name} missing")
            continue
        tv, ov = {v.name: v.number for v in e.value}, {v.name: v.number for v in o[e.name].value}
        out += [f"enum {prefix}{e.name}.{n} = {v}: ours {ov.get(n)}" for n, v in tv.items() if ov.get(n) != v]
        extra += [f"enum {prefix}{e.name}.{n}" for n in sorted(set(ov) - set(tv))]
    extra += [f"enum {prefix}{n}" for n in sorted(set(o) - {e.name for e in theirs})]


def _subset(theirs: d.FileDescriptorProto, ours: d.FileDescriptorProto) -> tuple[list[str], list[str]]:
    """What ``theirs`` defines and ``ours`` lacks or defines otherwise, and what only ``ours`` has."""
    out: list[str] = []
    extra: list[str] = []
    if theirs.package != ours.package:
        out.append(f"package {theirs.package}: ours {ours.package}")
    o = {m.name: m for m in ours.message_type}
    for m in theirs.message_type:
        if m.name in o:
            _subset_message(m.name, m, o[m.name], out, extra)
        else:
            out.append(f"message {m.name} missing")
    extra += [f"message {n}" for n in sorted(set(o) - {m.name for m in theirs.message_type})]
    _subset_enums("", list(theirs.enum_type), list(ours.enum_type), out, extra)
    os_ = {s.name: s for s in ours.service}
    for s in theirs.service:
        if s.name not in os_:
            out.append(f"service {s.name} missing")
            continue
        om = {m.name: m for m in os_[s.name].method}
        for m in s.method:
            mine = om.get(m.name)
            sig = (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
            if mine is None:
                out.append(f"rpc {s.name}.{m.name} missing")
            elif sig != (mine.input_type, mine.output_type, mine.client_streaming, mine.server_streaming):
                out.append(f"rpc {s.name}.{m.name} differs")
        extra += [f"rpc {s.name}.{n}" for n in sorted(set(om) - {m.name for m in s.method})]
    return out, extra


_JS_GETTER = re.compile(
    r"^proto\.apache\.rocketmq\.v2\.([\w.]+)\.prototype\.get(\w+) = function\([^)]*\) \{(.*?)^\};", re.M | re.S
)
_JS_FIELD = re.compile(r"jspb\.Message\.\w+\(this, (?:[A-Za-z_][\w.]*, )?(\d+)")


def _js_fields(js: str) -> dict[tuple[str, str], int]:
    """(message, getter) -> field number, from the getters of a google-protobuf generated ``*_pb.js``."""
    out: dict[tuple[str, str], int] = {}
    for m in _JS_GETTER.finditer(js):
        if number := _JS_FIELD.search(m.group(3)):
            out[(m.group(1), m.group(2))] = int(number.group(1))
    return out


def _js_differences(fd: d.FileDescriptorProto, js: str) -> list[str]:
    """Every field of ``fd`` (the bundled .proto) has its getter in the generated JavaScript, with its number: the
    .proto is what the client speaks."""
    have = _js_fields(js)
    out: list[str] = []

    def walk(prefix: str, m: Any) -> None:
        maps = {f"{prefix}{m.name}.{n.name}" for n in m.nested_type if n.options.map_entry}
        for f in m.field:
            camel = "".join(w[:1].upper() + w[1:] for w in f.name.split("_"))
            if f.type_name.lstrip(".").removeprefix("apache.rocketmq.v2.") in maps:
                camel += "Map"
            elif f.label == d.FieldDescriptorProto.LABEL_REPEATED:
                camel += "List"
            got = have.get((prefix + m.name, camel))
            if got != f.number:
                out.append(f"{prefix}{m.name}.{f.name} = {f.number}: the JavaScript get{camel} reads {got}")
        for n in m.nested_type:
            if not n.options.map_entry:
                walk(f"{prefix}{m.name}.", n)

    for m in fd.message_type:
        walk("", m)
    return out


def node(ours: dict[str, d.FileDescriptorProto], node_root: str) -> int:
    v2 = "apache/rocketmq/v2"
    theirs = _compile(node_root, [f"{v2}/definition.proto", f"{v2}/service.proto"])
    if theirs is None:
        print(json.dumps({"error": "protoc failed on the Node.js client's definitions"}))
        return 1
    report: dict[str, list[str]] = {}
    extras: dict[str, list[str]] = {}
    for name in ("definition.proto", "service.proto"):
        if name not in theirs or name not in ours:
            report[name] = [f"file missing: theirs {name in theirs}, ours {name in ours}"]
            continue
        report[name], extras[name] = _subset(theirs[name], ours[name])
        js = os.path.join(node_root, v2, name.replace(".proto", "_pb.js"))
        with open(js, encoding="utf-8") as f:
            report[name] += _js_differences(theirs[name], f.read())
    print(json.dumps({"files": report, "extra": extras}))
    return 1 if any(report.values()) else 0


def main(proto_dir: str, node_root: str | None = None) -> int:
    compiled = _compile(proto_dir, ["definition.proto", "service.proto"])
    if compiled is None:
        print(json.dumps({"error": "protoc failed on sievemq's definitions"}))
        return 1
    if node_root is not None:
        return node(compiled, node_root)
    ours = compiled
    report: dict[str, list[str]] = {}
    for mod in (definition_pb2, service_pb2):
        theirs = d.FileDescriptorProto()
        mod.DESCRIPTOR.CopyToProto(theirs)
        mine = ours.get(theirs.name)
        report[theirs.name] = ["file missing"] if mine is None else _diffs(_strip(theirs), mine)
    print(json.dumps({"files": report}))
    return 1 if any(report.values()) else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--node":
        sys.exit(main(sys.argv[1], sys.argv[3]))
    sys.exit(main(sys.argv[1]))
