"""Drives a Turnstone node + bridge with the original Python MQ client (turnstone 0.9.6), unchanged.

Usage: mq_compat.py <redis_host> <redis_port> <node_id> <runs>

Uses only the standard library and `turnstone.mq.client.TurnstoneClient` with its default
prefix (`turnstone`): the 0.9.6 client does not pass a custom prefix to its queues (cluster
spec §5), so the caller gives it a private Redis. The node runs the built-in scripted model:
it echoes a message, turns a `TOOL: <cmd>` line into a `bash` call (which needs approval
unless auto-approved) and answers a tool result with `done: <output>`.

Prints one `ok <check>: <detail>` line per passed check and exits 0; on the first failed
check prints `FAIL <check>: <detail>` and exits 1. A watchdog exits 2 if the whole run takes
longer than DEADLINE seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid

from checks import check, finish, start_watchdog
from turnstone.mq.client import TurnstoneClient
from turnstone.mq.protocol import (
    ApprovalRequestEvent,
    OutboundEvent,
    TurnCompleteEvent,
    WorkstreamCreatedEvent,
)

DEADLINE = float(os.environ.get("MQ_COMPAT_DEADLINE", "150"))
TURN_TIMEOUT = 30.0

def wait_for_node(client: TurnstoneClient, node_id: str) -> None:
    """The bridge writes its heartbeat once its node answers."""
    deadline = time.monotonic() + TURN_TIMEOUT
    nodes: list[dict] = []
    while time.monotonic() < deadline:
        nodes = client.list_nodes()
        if any(n.get("node_id") == node_id for n in nodes):
            break
        time.sleep(0.1)
    check(
        "list_nodes",
        any(n.get("node_id") == node_id and n.get("server_url") for n in nodes),
        nodes,
    )


def create_ws(client: TurnstoneClient, name: str, auto_approve: bool) -> str:
    """`create_workstream`, then its id from the matching `ws_created` on the global channel."""
    created: dict[str, str] = {}
    arrived = threading.Condition()

    def on_global(event: OutboundEvent) -> None:
        if isinstance(event, WorkstreamCreatedEvent):
            with arrived:
                created[event.correlation_id] = event.ws_id
                arrived.notify_all()

    client.subscribe(on_global)
    cid = client.create_workstream(name=name, auto_approve=auto_approve)
    with arrived:
        arrived.wait_for(lambda: cid in created, TURN_TIMEOUT)
    client.unsubscribe()
    ws_id = created.get(cid, "")
    if not ws_id:
        check("create_workstream", False, f"no ws_created for {cid}")
    return ws_id


class Finals:
    """`on_event` hook: remembers the `turn_complete` content per correlation id."""

    def __init__(self) -> None:
        self.content: dict[str, str] = {}

    def __call__(self, event: OutboundEvent) -> None:
        if isinstance(event, TurnCompleteEvent):
            self.content[event.correlation_id] = event.content


def basic(client: TurnstoneClient) -> None:
    ws_id = create_ws(client, "mq-compat", auto_approve=False)
    check("create_workstream", len(ws_id) == 32, ws_id)

    finals = Finals()
    text = "hello from the python mq client"
    result = client.send_and_wait(
        text, ws_id=ws_id, auto_approve=False, timeout=TURN_TIMEOUT, on_event=finals
    )
    check("send_and_wait.not_timed_out", not result.timed_out, result)
    check("send_and_wait.ok", result.ok, result.errors)
    check("send_and_wait.ws_id", result.ws_id == ws_id, result.ws_id)
    check(
        "send_and_wait.content",
        text in result.content
        and result.content == finals.content.get(result.correlation_id),
        (result.content, finals.content),
    )

    # Approval: the scripted model calls `bash`; the workstream does not auto-approve.
    asked: list[ApprovalRequestEvent] = []

    def approve_on_request(event: OutboundEvent) -> None:
        finals(event)
        if isinstance(event, ApprovalRequestEvent):
            asked.append(event)
            client.approve(event.correlation_id, ws_id=ws_id, approved=True)

    result = client.send_and_wait(
        "TOOL: echo hi",
        ws_id=ws_id,
        auto_approve=False,
        timeout=TURN_TIMEOUT,
        on_event=approve_on_request,
    )
    check("approve.not_timed_out", not result.timed_out, result)
    check(
        "approve.approval_request",
        len(asked) == 1
        and asked[0].correlation_id  # the request_id to answer (12 hex in 0.9.6)
        and [i.get("func_name") for i in asked[0].items] == ["bash"],
        [(a.correlation_id, a.items) for a in asked],
    )
    check(
        "approve.tool_result",
        [(name, out.strip()) for name, out in result.tool_results] == [("bash", "hi")],
        result.tool_results,
    )
    check(
        "approve.content",
        result.content.startswith("done:")
        and "hi" in result.content
        and result.content == finals.content.get(result.correlation_id),
        (result.content, finals.content),
    )

    health_cid = client.health()
    check("health", len(health_cid) == 12, health_cid)
    closed = client.close_workstream(ws_id)
    check("close_workstream", len(closed) == 12, closed)


def runs(client: TurnstoneClient, count: int) -> None:
    """`count` fresh workstreams, one `send_and_wait` each: the reply is never lost."""
    lost: list[tuple[int, str, str]] = []
    for i in range(count):
        ws_id = create_ws(client, f"mq-run-{i}", auto_approve=True)
        finals = Finals()
        text = f"run {i} marker {uuid.uuid4().hex[:8]}"
        result = client.send_and_wait(text, ws_id=ws_id, timeout=TURN_TIMEOUT, on_event=finals)
        final = finals.content.get(result.correlation_id)
        if result.timed_out or text not in result.content or result.content != final:
            lost.append((i, result.content, repr(final)))
    check(f"runs.existing_ws.{count}", not lost, lost)

    # `send_and_wait` without a ws_id: the bridge creates the workstream and the 0.9.6 client
    # subscribes to its channel only when `ws_created` reaches it, so events published before
    # that are not delivered to it (a race inside the client; the Rust client reads the
    # stream instead). Our bridge waits for that subscriber before starting the turn.
    lost = []
    for i in range(count):
        finals = Finals()
        text = f"new ws {i} marker {uuid.uuid4().hex[:8]}"
        result = client.send_and_wait(text, timeout=TURN_TIMEOUT, on_event=finals)
        final = finals.content.get(result.correlation_id)
        if (
            result.timed_out
            or not result.ws_id
            or text not in result.content
            or result.content != final
        ):
            lost.append((i, result.ws_id, result.content, repr(final)))
    # The bridge waits (briefly) for the new workstream's subscriber before the turn starts.
    check("runs.new_ws", not lost, f"{len(lost)} of {count} replies incomplete: {lost}")


def main() -> None:
    host, port, node_id, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    timer = start_watchdog(DEADLINE)
    with TurnstoneClient(host=host, port=port) as client:
        wait_for_node(client, node_id)
        basic(client)
        runs(client, count)
    finish(timer)


if __name__ == "__main__":
    main()
