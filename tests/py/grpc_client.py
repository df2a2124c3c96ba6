"""Drives a Turnstone node over gRPC from Python: the client is generated at run time from
`proto/turnstone/v1/*.proto` with grpcio-tools, so the contract is proven from another
language than the server's.

Usage: grpc_client.py <host:port> <token>

The node must run the built-in scripted model (no --base-url): it echoes a message, turns a
`TOOL: <cmd>` line into a `bash` call that needs approval, and answers a tool result with
`done: <output>`. Report protocol: `checks.py` (one `ok <check>: <detail>` line per check).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import urllib.request

import checks

DEADLINE = 40.0
STREAM_TIMEOUT = 20.0

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PROTO_ROOT = os.path.join(ROOT, "proto")
PROTOS = ["turnstone/v1/events.proto", "turnstone/v1/node.proto", "turnstone/v1/console.proto"]


def generate(out: str) -> None:
    """`python -m grpc_tools.protoc` into `out`, as a package that shadows nothing else."""
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    code = protoc.main(
        ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out}",
         f"--grpc_python_out={out}", *PROTOS]
    )
    checks.check("codegen.protoc", code == 0, f"grpc_tools.protoc exited {code}")
    for package in ("turnstone", "turnstone/v1"):
        open(os.path.join(out, package, "__init__.py"), "a").close()
    # The generated `turnstone` package must win over any installed one of that name.
    sys.path.insert(0, out)
    for name in [m for m in sys.modules if m == "turnstone" or m.startswith("turnstone.")]:
        del sys.modules[name]


def main() -> None:
    target, token = sys.argv[1], sys.argv[2]
    timer = checks.start_watchdog(DEADLINE)
    out = tempfile.mkdtemp(prefix="turnstone-grpc-py-")
    generate(out)

    import grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    from turnstone.v1 import events_pb2, node_pb2, node_pb2_grpc

    channel = grpc.insecure_channel(target)
    node = node_pb2_grpc.NodeServiceStub(channel)
    auth = [("authorization", f"Bearer {token}")]

    # Reflection: what `grpcurl list` shows.
    refl = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = refl.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
    )
    services = sorted(s.name for r in answers for s in r.list_services_response.service)
    checks.check(
        "reflection.list_services",
        "turnstone.v1.NodeService" in services and "grpc.health.v1.Health" in services
        and "turnstone.v1.ConsoleService" not in services,
        services,
    )
    answers = refl.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="turnstone.v1.NodeService")]),
        timeout=10,
    )
    files = [r.file_descriptor_response.file_descriptor_proto for r in answers]
    checks.check("reflection.file_containing_symbol", len(files) == 1 and len(files[0]) > 0,
                 f"{len(files[0]) if files else 0} file descriptors")

    # Auth and bad input.
    def code_of(call, *args, **kwargs) -> grpc.StatusCode:
        try:
            call(*args, **kwargs)
        except grpc.RpcError as e:
            return e.code()
        return grpc.StatusCode.OK

    checks.check(
        "auth.unauthenticated",
        code_of(node.ListWorkstreams, node_pb2.ListWorkstreamsRequest(), timeout=10)
        == grpc.StatusCode.UNAUTHENTICATED,
    )
    checks.check(
        "auth.bad_token",
        code_of(node.ListWorkstreams, node_pb2.ListWorkstreamsRequest(), timeout=10,
                metadata=[("authorization", "Bearer not-the-token")])
        == grpc.StatusCode.UNAUTHENTICATED,
    )
    listed = node.ListWorkstreams(node_pb2.ListWorkstreamsRequest(), metadata=auth, timeout=10)
    checks.check("list_workstreams", len(listed.workstreams) >= 1, len(listed.workstreams))

    created = node.CreateWorkstream(
        node_pb2.CreateWorkstreamRequest(name="from-python"), metadata=auth, timeout=10)
    ws = created.ws_id
    checks.check("create_workstream", bool(ws) and created.name == "from-python", created)

    checks.check(
        "bad_input.unknown_workstream",
        code_of(node.Send, node_pb2.SendRequest(ws_id="no-such-ws", message="x"),
                metadata=auth, timeout=10) == grpc.StatusCode.NOT_FOUND,
    )
    checks.check(
        "bad_input.empty_message",
        code_of(node.Send, node_pb2.SendRequest(ws_id=ws, message="  "),
                metadata=auth, timeout=10) == grpc.StatusCode.INVALID_ARGUMENT,
    )
    # Bytes that are no protobuf message: the field tag 0 is invalid.
    raw = channel.unary_unary("/turnstone.v1.NodeService/Send",
                              request_serializer=None, response_deserializer=None)
    checks.check(
        "bad_input.malformed",
        code_of(raw, b"\x00\x01\x02\xff\xff", metadata=auth, timeout=10)
        == grpc.StatusCode.INTERNAL,
    )
    huge = node_pb2.SendRequest(ws_id=ws, message="x" * (1024 * 1024 + 1))
    checks.check(
        "bad_input.oversized",
        code_of(node.Send, huge, metadata=auth, timeout=10)
        in (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED),
    )

    # A tool call: stream, send, the approval request, then disconnect mid-turn. A witness
    # stream stays connected throughout: what the resumed client must end up with.
    witness = node.StreamEvents(node_pb2.StreamEventsRequest(ws_id=ws), metadata=auth,
                                timeout=STREAM_TIMEOUT)
    stream = node.StreamEvents(node_pb2.StreamEventsRequest(ws_id=ws), metadata=auth,
                               timeout=STREAM_TIMEOUT)
    first = next(stream).event
    checks.check("stream_events.connected", first.type == "connected", first.type)
    sent = node.Send(node_pb2.SendRequest(ws_id=ws, message="TOOL: echo from-python"),
                     metadata=auth, timeout=10)
    checks.check("send.tool", sent.status == "ok", sent.status)
    seqs: list[int] = []
    request_id = ""
    for item in stream:
        e = item.event
        if e.HasField("seq"):
            seqs.append(e.seq)
        if e.WhichOneof("payload") == "approve_request":
            request_id = e.approve_request.request_id
            break
    checks.check("stream_events.approve_request", bool(request_id), request_id)
    stream.cancel()
    checks.check("stream_events.disconnected", bool(seqs), f"last seq {seqs[-1] if seqs else None}")

    approved = node.Approve(node_pb2.ApproveRequest(ws_id=ws, approved=True,
                                                    request_id=request_id),
                            metadata=auth, timeout=10)
    checks.check("approve", approved.status == "ok", approved.status)
    checks.check(
        "approve.decided_once",
        code_of(node.Approve, node_pb2.ApproveRequest(ws_id=ws, approved=False,
                                                      request_id=request_id),
                metadata=auth, timeout=10) == grpc.StatusCode.FAILED_PRECONDITION,
    )

    # Resume from the last sequence number seen: the rest of the turn, nothing twice.
    resumed = node.StreamEvents(node_pb2.StreamEventsRequest(ws_id=ws, after_seq=seqs[-1]),
                                metadata=auth, timeout=STREAM_TIMEOUT)
    rest = []
    for item in resumed:
        rest.append(item.event)
        if item.event.type == "turn_complete":
            break
    resumed.cancel()
    all_seqs = seqs + [e.seq for e in rest if e.HasField("seq")]
    whole = []
    for item in witness:
        if item.event.HasField("seq"):
            whole.append(item.event.seq)
        if item.event.type == "turn_complete":
            break
    witness.cancel()
    checks.check("resume.no_gap_no_duplicate", all_seqs == whole,
                 f"resumed {all_seqs} witness {whole}")
    kinds = [e.type for e in rest]
    checks.check("resume.tool_result", "tool_result" in kinds, kinds)
    text = "".join(e.content.text for e in rest if e.WhichOneof("payload") == "content")
    checks.check("resume.content", text.startswith("done: "), text)
    done = rest[-1].turn_complete
    checks.check("resume.turn_complete",
                 done.state == events_pb2.WORKSTREAM_STATE_IDLE and done.content == text, done)

    waited = node.SendAndWait(
        node_pb2.SendAndWaitRequest(send=node_pb2.SendRequest(ws_id=ws, message="and wait"),
                                    timeout_ms=15000),
        metadata=auth, timeout=20)
    checks.check("send_and_wait", waited.completed and waited.turn_complete.content == "and wait",
                 waited.turn_complete)

    # Memories and skills: written over HTTP, read over gRPC.
    def http_post(path: str, body: dict) -> None:
        req = urllib.request.Request(
            f"http://{target}{path}", data=json.dumps(body).encode(), method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status in (200, 201), resp.status

    http_post("/v1/api/memories", {"name": "py note", "content": "grpc from python",
                                   "type": "reference"})
    http_post("/v1/api/admin/skills", {"name": "py-skill", "content": "Answer in Python.",
                                       "tags": ["py"]})
    listed = node.ListMemories(node_pb2.ListMemoriesRequest(type="reference"), metadata=auth,
                               timeout=10)
    checks.check("memories.list",
                 [m.name for m in listed.memories] == ["py_note"] and listed.total == 1, listed)
    found = node.SearchMemories(node_pb2.SearchMemoriesRequest(query="PYTHON grpc"),
                                metadata=auth, timeout=10)
    checks.check("memories.search",
                 [m.content for m in found.memories] == ["grpc from python"], found)
    skills = node.ListSkills(node_pb2.ListSkillsRequest(), metadata=auth, timeout=10)
    checks.check("skills.list",
                 any(s.name == "py-skill" and list(s.tags) == ["py"] for s in skills.skills),
                 [s.name for s in skills.skills])
    renamed = node.RenameWorkstream(node_pb2.RenameWorkstreamRequest(ws_id=ws, name="py renamed"),
                                    metadata=auth, timeout=10)
    names = [w.name for w in node.ListWorkstreams(node_pb2.ListWorkstreamsRequest(),
                                                   metadata=auth, timeout=10).workstreams]
    checks.check("rename_workstream", renamed.name == "py renamed" and "py renamed" in names,
                 names)

    closed = node.CloseWorkstream(node_pb2.CloseWorkstreamRequest(ws_id=ws), metadata=auth,
                                  timeout=10)
    checks.check("close_workstream", closed.status == "ok", closed.status)
    channel.close()
    checks.finish(timer)


if __name__ == "__main__":
    main()
