#!/usr/bin/python3
"""An independent reader of metron's Chakra export (docs/TRACES.md §3, Note [chakra export] in
chakra/include/metron/chakra/chakra_export.h).

For each step folder that chakra_export_driver wrote (graph.json, durations.json, metron.<r>.et,
metron.comm_group.json), decodes every .et file by hand (varint32 length, then the message, as
Chakra's protolib.decodeMessage does) with classes protoc generated from chakra/proto/et_def.proto,
and compares it node by node with what the graph's JSON form says it must hold. Exits 0 when all
agree, 1 with every difference, 77 (skipped) without python3-protobuf.
"""

import json
import os
import sys

try:
    import et_def_pb2 as pb
except ImportError as error:  # python3-protobuf missing, or the generated module
    print(f"read_chakra.py: skipped: cannot import the protobuf classes ({error})")
    sys.exit(77)

COMM_TYPES = {"all-reduce": 0, "reduce": 1, "all-gather": 2, "broadcast": 5, "all-to-all": 6,
              "reduce-scatter": 7}
CASES = {"is_cpu_op": "bool_val", "num_ops": "int64_val", "tensor_size": "uint64_val",
         "comm_type": "int64_val", "comm_size": "int64_val", "comm_src": "int32_val",
         "comm_dst": "int32_val", "comm_tag": "int32_val", "pg_name": "string_val"}


def read_varint32(data, pos):
    """A base-128 varint of at most 5 bytes, as protobuf's CodedInputStream::ReadVarint32."""
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 28:
            raise ValueError(f"bad varint at byte {pos}")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def decode(path):
    with open(path, "rb") as f:
        data = f.read()
    messages, pos = [], 0
    while pos < len(data):
        size, pos = read_varint32(data, pos)
        if size == 0 or pos + size > len(data):
            raise ValueError(f"{path}: message of {size} bytes at byte {pos} (file {len(data)})")
        messages.append(data[pos:pos + size])
        pos += size
    meta = pb.GlobalMetadata.FromString(messages[0])
    return meta, [pb.Node.FromString(m) for m in messages[1:]]


def attrs_of(message):
    out = {}
    for a in message.attr:
        out[a.name] = (a.WhichOneof("value"), getattr(a, a.WhichOneof("value")))
    return out


def expected_deps(graph):
    """Note [chakra export]: deps, a wait's target, the stream's previous task, the last wait."""
    tasks = graph["tasks"]
    deps = {}
    for order in graph["issue_order"]:
        last_on_stream, last_wait = {}, None
        for tid in order:
            t = tasks[tid]
            d = set(t.get("deps", []))
            if last_wait is not None:
                d.add(last_wait)
            if t["kind"] == "host-wait":
                d.add(t["target"])
                last_wait = tid
            else:
                if t["stream"] in last_on_stream:
                    d.add(last_on_stream[t["stream"]])
                last_on_stream[t["stream"]] = tid
            deps[tid] = d
    return deps


def expected_attrs(task):
    kind, rank = task["kind"], task["rank"]
    if kind == "compute":
        return 4, {"num_ops": round(task.get("flops", 0)),
                   "tensor_size": round(task.get("bytes_moved", 0)), "is_cpu_op": False}
    if kind == "host-wait":
        return 4, {"num_ops": 0, "tensor_size": 0, "is_cpu_op": False}
    if kind == "collective":
        return 7, {"comm_type": COMM_TYPES[task["op"]], "comm_size": task["bytes"],
                   "pg_name": str(task["group"] + 1), "is_cpu_op": False}
    src, dst = (rank, task["peer"]) if kind == "send" else (task["peer"], rank)
    return (5 if kind == "send" else 6), {"comm_src": src, "comm_dst": dst,
                                          "comm_size": task["bytes"], "is_cpu_op": False}


def check_step(folder, problems):
    with open(os.path.join(folder, "graph.json")) as f:
        graph = json.load(f)
    with open(os.path.join(folder, "durations.json")) as f:
        durations = json.load(f)
    tasks = graph["tasks"]
    deps = expected_deps(graph)
    tags = {}  # task id -> comm_tag
    for rank, order in enumerate(graph["issue_order"]):
        meta, nodes = decode(os.path.join(folder, f"metron.{rank}.et"))
        where = f"{os.path.basename(folder)} rank {rank}"
        meta_attrs = attrs_of(meta)
        if meta.version != "0.0.4" or meta_attrs.get("schema") != ("string_val", "metron") \
                or meta_attrs.get("pid") != ("int64_val", rank):
            problems.append(f"{where}: metadata {meta}")
        if sorted(n.id for n in nodes) != sorted(order):
            problems.append(f"{where}: node ids differ from the rank's tasks")
        written = set()
        for n in nodes:
            t = tasks[n.id]
            want_type, want = expected_attrs(t)
            got = attrs_of(n)
            if n.type != want_type:
                problems.append(f"{where}: node {n.id}: type {n.type}, expected {want_type}")
            for name, value in want.items():
                if got.get(name) != (CASES[name], value):
                    problems.append(f"{where}: node {n.id}: {name} = {got.get(name)}, "
                                    f"expected {(CASES[name], value)}")
            if t["kind"] in ("send", "recv"):
                if got.get("comm_tag", (None,))[0] != "int32_val":
                    problems.append(f"{where}: node {n.id}: comm_tag {got.get('comm_tag')}")
                tags[n.id] = got.get("comm_tag", (None, None))[1]
            if set(n.data_deps) != deps[n.id] or list(n.data_deps) != sorted(set(n.data_deps)):
                problems.append(f"{where}: node {n.id}: data_deps {list(n.data_deps)}, "
                                f"expected {sorted(deps[n.id])}")
            if not set(n.data_deps) <= written:
                problems.append(f"{where}: node {n.id} comes before one of its parents")
            written.add(n.id)
            micros = (durations[n.id] * 2 + 1000) // 2000  # round half up
            if n.duration_micros != micros or not n.name:
                problems.append(f"{where}: node {n.id}: duration {n.duration_micros} µs, "
                                f"expected {micros}; name {n.name!r}")
    # A send and the recv it matches (same sender, receiver and graph tag) share one comm_tag,
    # and no other transfer uses it.
    sends = {(t["rank"], t["peer"], t["tag"]): t["id"] for t in tasks if t["kind"] == "send"}
    recvs = {(t["peer"], t["rank"], t["tag"]): t["id"] for t in tasks if t["kind"] == "recv"}
    if sends.keys() != recvs.keys():
        problems.append(f"{folder}: the graph's sends and recvs do not pair")
    pair_tags = [(tags[sends[k]], tags[recvs[k]]) for k in sends if k in recvs]
    if any(a != b for a, b in pair_tags) or len({a for a, _ in pair_tags}) != len(pair_tags):
        problems.append(f"{folder}: comm_tags are not equal per pair and unique per transfer")
    with open(os.path.join(folder, "metron.comm_group.json")) as f:
        groups = json.load(f)
    want_groups = {str(g["id"] + 1): g["ranks"] for g in graph.get("groups", [])}
    if groups != want_groups:
        problems.append(f"{folder}: comm groups {groups}, expected {want_groups}")
    return len(tasks)


def main():
    root = sys.argv[1]
    problems, checked = [], []
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if os.path.isfile(os.path.join(folder, "graph.json")):
            checked.append(f"{name} ({check_step(folder, problems)} tasks)")
    if not checked:
        problems.append(f"{root}: no step folders")
    for p in problems[:50]:
        print(p)
    print(f"read_chakra.py: {len(checked)} steps: {', '.join(checked)}; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
