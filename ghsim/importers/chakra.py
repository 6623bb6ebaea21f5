"""Chakra execution traces (``.et``): protobuf messages, length-delimited, optionally gzipped.

The message types are declared here from the published schema (mlcommons/chakra
``schema/protobuf/et_def.proto``, package ``ChakraProtoMsg``), built at import time with
protobuf's descriptor API: no generated code is copied. A file is a ``GlobalMetadata`` message
followed by ``Node`` messages, each preceded by its length as a varint.

Import turns each node into a replay event (compute nodes with their duration and FLOPs,
collective nodes with their type and size, send/receive nodes); export writes any ghsim
workload (lowered or imported) in the same form (``ghsim.report.chakra``: one file per rank
class, or one per NPU as ASTRA-sim reads them).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError

from ghsim.errors import InputError
from ghsim.files import read_trace_bytes
from ghsim.importers.checks import Fields, TraceError, check_count
from ghsim.importers.kineto import GpuEvent, TraceRank
from ghsim.limits import MAX_CONFIG_BYTES, MAX_TRACE_EVENTS, MAX_TRACE_READ_BYTES
from ghsim.outputs import atomic_open

F = descriptor_pb2.FieldDescriptorProto
NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",
              "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE", "STORAGE_NODE",
              "BATCH_NODE", "CHECKPOINT_NODE")
COLLECTIVES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
               "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
_GHSIM_COLLECTIVE = {"ALL_REDUCE": "all_reduce", "ALL_GATHER": "all_gather",
                     "REDUCE_SCATTER": "reduce_scatter", "REDUCE_SCATTER_BLOCK": "reduce_scatter",
                     "ALL_TO_ALL": "all_to_all", "BROADCAST": "broadcast"}
_CHAKRA_COLLECTIVE = {"all_reduce": "ALL_REDUCE", "all_gather": "ALL_GATHER",
                      "reduce_scatter": "REDUCE_SCATTER", "all_to_all": "ALL_TO_ALL",
                      "broadcast": "BROADCAST"}
"""What an export names each collective: the types ASTRA-sim's workload layer issues
(``Workload::issue_coll_comm`` takes ALL_REDUCE, ALL_TO_ALL, ALL_GATHER, REDUCE_SCATTER and
BROADCAST, and stops on any other, REDUCE_SCATTER_BLOCK included)."""

_SCALARS = (("double_val", 3, F.TYPE_DOUBLE), ("float_val", 5, F.TYPE_FLOAT),
            ("int32_val", 7, F.TYPE_INT32), ("int64_val", 9, F.TYPE_INT64),
            ("uint32_val", 11, F.TYPE_UINT32), ("uint64_val", 13, F.TYPE_UINT64),
            ("sint32_val", 15, F.TYPE_SINT32), ("sint64_val", 17, F.TYPE_SINT64),
            ("fixed32_val", 19, F.TYPE_FIXED32), ("fixed64_val", 21, F.TYPE_FIXED64),
            ("sfixed32_val", 23, F.TYPE_SFIXED32), ("sfixed64_val", 25, F.TYPE_SFIXED64),
            ("bool_val", 27, F.TYPE_BOOL), ("string_val", 29, F.TYPE_STRING),
            ("bytes_val", 31, F.TYPE_BYTES))


def _field(message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: int,
           label: int = F.LABEL_OPTIONAL, type_name: str = "", oneof: int | None = None) -> None:
    field = message.field.add(name=name, number=number, type=kind, label=label)
    if type_name:
        field.type_name = type_name
    if oneof is not None:
        field.oneof_index = oneof


def _schema() -> descriptor_pb2.FileDescriptorProto:
    """The subset of et_def.proto ghsim reads and writes (unknown fields are kept as such)."""
    proto = descriptor_pb2.FileDescriptorProto(name="ghsim_chakra_et_def.proto",
                                               package="ChakraProtoMsg", syntax="proto3")
    for name, _, kind in _SCALARS:
        listed = proto.message_type.add(name=name.removesuffix("_val").title().replace("_", "")
                                        .replace("Int", "Int").replace("Uint", "Uint") + "List")
        _field(listed, "values", 1, kind, F.LABEL_REPEATED)
    attribute = proto.message_type.add(name="AttributeProto")
    attribute.oneof_decl.add(name="value")
    _field(attribute, "name", 1, F.TYPE_STRING)
    _field(attribute, "doc_string", 2, F.TYPE_STRING)
    for (name, number, kind), listed in zip(_SCALARS, proto.message_type, strict=False):
        _field(attribute, name, number, kind, oneof=0)
        _field(attribute, name.replace("_val", "_list"), number + 1, F.TYPE_MESSAGE,
               type_name=f".ChakraProtoMsg.{listed.name}", oneof=0)
    metadata = proto.message_type.add(name="GlobalMetadata")
    _field(metadata, "version", 1, F.TYPE_STRING)
    _field(metadata, "attr", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    io = proto.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types"), 1):
        _field(io, name, number, F.TYPE_STRING)
    node_type = proto.enum_type.add(name="NodeType")
    for number, name in enumerate(NODE_TYPES):
        node_type.value.add(name=name, number=number)
    node = proto.message_type.add(name="Node")
    _field(node, "id", 1, F.TYPE_UINT64)
    _field(node, "name", 2, F.TYPE_STRING)
    _field(node, "type", 3, F.TYPE_ENUM, type_name=".ChakraProtoMsg.NodeType")
    _field(node, "ctrl_deps", 4, F.TYPE_UINT64, F.LABEL_REPEATED)
    _field(node, "data_deps", 5, F.TYPE_UINT64, F.LABEL_REPEATED)
    _field(node, "start_time_micros", 6, F.TYPE_UINT64)
    _field(node, "duration_micros", 7, F.TYPE_UINT64)
    _field(node, "inputs", 8, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    _field(node, "outputs", 9, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    _field(node, "attr", 10, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_schema())
GlobalMetadata = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata"))
Node = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("ChakraProtoMsg.Node"))


def _messages(data: bytes, source: str) -> Iterator[bytes]:
    position = 0
    while position < len(data):
        try:
            size, position = _DecodeVarint32(data, position)
        except (IndexError, DecodeError):
            raise TraceError(source, "", "truncated Chakra trace (a length prefix is cut)") \
                from None
        if position + size > len(data):
            raise TraceError(source, "", "truncated Chakra trace (a message is cut)")
        yield data[position:position + size]
        position += size


def _attr(message: Any) -> tuple[str, Any]:
    which = message.WhichOneof("value")
    if not which:
        return message.name, None
    value = getattr(message, which)
    return message.name, list(value.values) if which.endswith("_list") else value


def read_chakra(path: Path, rank: int = 0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metadata attributes and the nodes (as dicts) of one ``.et`` file."""
    data = _read(path)
    if not data:
        raise TraceError(str(path), "", "empty file: expected a Chakra trace")
    chunks = _messages(data, str(path))
    try:
        metadata = GlobalMetadata.FromString(next(chunks))
        nodes: list[dict[str, Any]] = []
        for chunk in chunks:
            if len(nodes) >= MAX_TRACE_EVENTS:
                check_count(len(nodes) + 1, str(path), "nodes")
            node = Node.FromString(chunk)
            nodes.append({"id": node.id, "name": node.name, "type": NODE_TYPES[node.type]
                          if node.type < len(NODE_TYPES) else "INVALID_NODE",
                          "ctrl_deps": list(node.ctrl_deps), "data_deps": list(node.data_deps),
                          "start_us": node.start_time_micros, "dur_us": node.duration_micros,
                          "attr": dict(_attr(a) for a in node.attr)})
    except (DecodeError, ValueError, StopIteration) as error:
        raise TraceError(str(path), "", f"not a Chakra protobuf trace ({error})") from None
    if not nodes:
        raise TraceError(str(path), "", "the Chakra trace holds no nodes")
    return {"version": metadata.version, **dict(_attr(a) for a in metadata.attr)}, nodes


def _read(path: Path, limit: int = MAX_TRACE_READ_BYTES,
          limit_name: str = "MAX_TRACE_READ_BYTES") -> bytes:
    """The (inflated) bytes of a trace file, both sizes capped."""
    try:
        return read_trace_bytes(path, limit=limit, limit_name=limit_name)
    except TraceError:
        raise
    except InputError as error:
        raise TraceError(error.source, error.key_path, error.message) from None


def comm_type(fields: Fields, value: Any, field: str) -> str:
    """A Chakra collective type (an index into ``COLLECTIVES``), checked."""
    index = fields.integer(0 if value is None else value, field, 0, len(COLLECTIVES) - 1)
    return COLLECTIVES[index]


def chakra_rank(path: Path, rank: int = 0) -> TraceRank:
    """A Chakra trace as a replayable rank: nodes in id order on one stream (each node's
    duration, size and collective type checked)."""
    _, nodes = read_chakra(path, rank)
    events = []
    clock = 0.0
    order = sorted(range(len(nodes)), key=lambda i: nodes[i]["id"])
    for index in order:
        node = nodes[index]
        fields = Fields(str(path), f"nodes[{index}]")
        attr = node["attr"]
        kind = node["type"]
        if kind not in ("COMM_COLL_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE", "COMP_NODE"):
            continue
        duration = fields.duration(node["dur_us"], "duration_micros")
        size = fields.number(attr.get("comm_size") or 0, "attr.comm_size")
        if kind == "COMM_COLL_NODE":
            collective = comm_type(fields, attr.get("comm_type"), "attr.comm_type")
            event = GpuEvent(node["name"], "kernel", 0, clock, duration, "collective",
                             bytes=size,
                             collective=_GHSIM_COLLECTIVE.get(collective, "all_reduce"))
        elif kind in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
            event = GpuEvent(node["name"], "kernel", 1, clock, duration, "collective",
                             bytes=size, collective="send_recv")
        else:
            flops = fields.number(attr.get("num_ops") or 0, "attr.num_ops")
            event = GpuEvent(node["name"], "kernel", 0, clock, duration,
                             "gemm" if flops else "elementwise", flops=flops)
        events.append(event)
        clock += event.dur_us
    if not events:
        raise TraceError(str(path), "", "the Chakra trace holds no compute or communication node")
    return TraceRank(str(path), rank, "", events, None, 0, bytes_read=path.stat().st_size)


def chakra_collective(name: str) -> str:
    """The Chakra collective type an export writes for ghsim's collective ``name``."""
    return _CHAKRA_COLLECTIVE.get(name, "ALL_REDUCE")


def framed(message: Any) -> bytes:
    """A message as a file holds it: its length as a varint, then its bytes."""
    return framed_payload(message.SerializeToString())


def attribute_bytes(name: str, value: int | str) -> bytes:
    """One ``attr`` entry of a Node as protobuf encodes it, for appending to a serialized Node
    (repeated fields concatenate): field 10, an AttributeProto of its ``name`` (field 1) and an
    ``int64_val`` (field 9, a varint) or a ``string_val`` (field 29). A hundred times faster
    than building the message, for exports that write millions of nodes."""
    key = name.encode()
    body = b"\x0a" + length_prefix(len(key)) + key
    if isinstance(value, str):
        text = value.encode()
        body += b"\xea\x01" + length_prefix(len(text)) + text
    else:
        if value < 0:
            raise ValueError(f"attribute {name}: expected a value >= 0, got {value}")
        body += b"\x48" + bytes(_VarintBytes(value))
    return b"\x52" + length_prefix(len(body)) + body


def framed_payload(payload: bytes) -> bytes:
    """A serialized message as a file holds it: its length as a varint, then its bytes."""
    return length_prefix(len(payload)) + payload


@functools.lru_cache(maxsize=4096)
def length_prefix(length: int) -> bytes:
    """What precedes a message of ``length`` bytes in a file: the length as a varint (kept,
    since exports frame millions of nodes of a few hundred lengths)."""
    return bytes(_VarintBytes(length))


def _write(handle: Any, message: Any) -> None:
    handle.write(framed(message))


def write_chakra(path: Path, rank: TraceRank) -> None:
    """Write one rank's events as a Chakra trace (nodes chained in order)."""
    with atomic_open(path, "wb") as handle:
        metadata = GlobalMetadata(version="0.0.4")
        metadata.attr.add(name="schema", string_val="ghsim")
        _write(handle, metadata)
        for index, event in enumerate(rank.events):
            node = Node(id=index, name=event.name, duration_micros=round(event.dur_us),
                        start_time_micros=round(event.start_us))
            if index:
                node.ctrl_deps.append(index - 1)
            if event.klass == "collective":
                if event.collective == "send_recv":
                    node.type = NODE_TYPES.index("COMM_SEND_NODE")
                else:
                    node.type = NODE_TYPES.index("COMM_COLL_NODE")
                    kind = COLLECTIVES.index(chakra_collective(event.collective or ""))
                    node.attr.add(name="comm_type", int64_val=kind)
                node.attr.add(name="comm_size", int64_val=int(event.bytes))
            else:
                node.type = NODE_TYPES.index("COMP_NODE")
                if event.flops:
                    node.attr.add(name="num_ops", int64_val=int(event.flops))
            node.attr.add(name="is_cpu_op", bool_val=False)
            _write(handle, node)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def feeder_rank(path: Path, rank: int = 0) -> TraceRank:
    """Chakra's JSON feeder form (``workload_graph``: ``Id``, ``Name``, ``NodeType``,
    ``runtime``, ...) as a replayable rank."""
    source = str(path)
    try:
        document = json.loads(_read(path, MAX_CONFIG_BYTES, "MAX_CONFIG_BYTES"),
                              parse_constant=_not_json)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as error:
        raise TraceError(source, "", f"not a Chakra JSON trace ({error})") from None
    except RecursionError:
        raise TraceError(source, "", "not a Chakra JSON trace (nested too deeply)") from None
    graph = document.get("workload_graph") if isinstance(document, dict) else None
    if not isinstance(graph, list) or not graph:
        raise TraceError(source, "workload_graph", "expected a non-empty list of nodes")
    check_count(len(graph), source, "nodes")
    checked = []
    for index, node in enumerate(graph):
        fields = Fields(source, f"workload_graph[{index}]")
        if not isinstance(node, dict):
            raise fields.fail("", "a node object", node)
        node_type = fields.integer(node.get("NodeType", 0), "NodeType", 0, 2**31)
        checked.append((fields.integer(node.get("Id", 0), "Id", -(2**63)), index, node,
                        node_type, fields))
    events, clock = [], 0.0
    for _, _, node, node_type, fields in sorted(checked, key=lambda c: (c[0], c[1])):
        kind = NODE_TYPES[node_type] if node_type < len(NODE_TYPES) else "INVALID_NODE"
        if kind not in ("COMM_COLL_NODE", "COMP_NODE"):
            continue
        runtime = fields.duration(node.get("runtime") or 0, "runtime")
        name = fields.text(node.get("Name"), "Name")
        if kind == "COMM_COLL_NODE":
            collective = comm_type(fields, node.get("comm_type"), "comm_type")
            event = GpuEvent(name, "kernel", 0, clock, runtime, "collective",
                             bytes=fields.number(node.get("comm_size") or 0, "comm_size"),
                             collective=_GHSIM_COLLECTIVE.get(collective, "all_reduce"))
        else:
            event = GpuEvent(name, "kernel", 0, clock, runtime, "elementwise")
        events.append(event)
        clock += runtime
    if not events:
        raise TraceError(str(path), "workload_graph", "holds no compute or communication node")
    return TraceRank(str(path), rank, "", events, None, 0, bytes_read=path.stat().st_size)
