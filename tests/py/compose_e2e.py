"""Drives the compose stack (deploy/compose/compose.yaml) with the original Python SDK and MQ
client (turnstone 0.9.6), unchanged, and restarts one node container while sends flow.

Usage: compose_e2e.py <console_url> <auth_token> <redis_port> <redis_password> <restart_command...>

Run by scripts/deploy-compose-e2e, which brings the stack up, reads the generated secrets
and passes the command that restarts node-a's container. Everything goes through ports the
stack publishes on 127.0.0.1: the console (SDK `TurnstoneConsole`) and Redis (MQ client
`TurnstoneClient`, the bridges' queues). The nodes run the scripted demo model, which echoes.

Checks: the console sees both nodes; a workstream created through the console on node-b
answers; the console's administration has its store (the nodes' PostgreSQL); then SENDS messages are pushed through the MQ client to the shared queue (each
creates its own workstream on whichever node takes it) while node-a's container restarts.
(Sends hard-targeted at a node that is down are dead-lettered by design, docs/queue.md.) Every send must end in exactly one `turn_complete` with its own text (0 lost, 0
duplicated), counted in the bridges' per-workstream Redis streams, and nothing may reach the
dead-letter list. Prints `ok <check>: <detail>` per check; `FAIL <check>: <detail>` and exit 1
on the first failure; a watchdog exits 2 after DEADLINE seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import redis
from checks import check, finish, start_watchdog
from turnstone.mq.client import TurnstoneClient
from turnstone.sdk import TurnstoneConsole

DEADLINE = float(os.environ.get("COMPOSE_E2E_DEADLINE", "300"))
SENDS = int(os.environ.get("COMPOSE_E2E_SENDS", "60"))
# A restart that took longer than the drain timeout (25 s) plus a start ended in SIGKILL.
DRAIN_BOUND = 35.0
PREFIX = "turnstone"
def wait_until(what: str, timeout: float, probe):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except Exception as e:  # the service may still be starting
            last = e
        time.sleep(0.5)
    check(what, False, f"not within {timeout} s; last: {last!r}")
    return None


def stream_events(r: redis.Redis) -> list[tuple[str, dict]]:
    """Every event in every per-workstream stream the bridges keep: (ws_id, event)."""
    out = []
    for key in sorted(set(r.scan_iter(match=f"{PREFIX}:stream:*", count=1000))):
        ws = key.rsplit(":", 1)[-1]
        for _id, fields in r.xrange(key):
            out.append((ws, json.loads(fields["event"])))
    return out


def main() -> None:
    console_url, token, redis_port, redis_password = sys.argv[1:5]
    restart = sys.argv[5:]
    timer = start_watchdog(DEADLINE)

    with TurnstoneConsole(console_url, token=token) as console:
        health = console.health()
        check("console.health", health.status == "ok", health)
        nodes = wait_until(
            "console.nodes", 90,
            lambda: (n := console.nodes()) and sorted(x.node_id for x in n.nodes if x.reachable) == ["node-a", "node-b"] and n,
        )
        check("console.nodes", True, sorted((x.node_id, x.server_url) for x in nodes.nodes))
        created = console.create_workstream(node_id="node-b", name="compose-e2e", initial_message="hello through the console")
        check("console.create_workstream", created.status == "ok" and created.target_node == "node-b", created)
    # The console's administration runs on the nodes' PostgreSQL (not "storage unavailable").
    request = urllib.request.Request(f"{console_url}/v1/api/admin/users", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        users = json.loads(reply.read())
    check("console.store", reply.status == 200 and "users" in users, users)

    r = redis.Redis(host="127.0.0.1", port=int(redis_port), password=redis_password, decode_responses=True)
    with TurnstoneClient(host="127.0.0.1", port=int(redis_port), password=redis_password) as client:
        listed = wait_until(
            "mq.list_nodes", 60,
            lambda: (ns := client.list_nodes()) and {"node-a", "node-b"} <= {n.get("node_id") for n in ns} and ns,
        )
        check("mq.list_nodes", True, sorted(n.get("node_id") for n in listed))

        # Sends flow while node-a's container restarts.
        texts: dict[str, str] = {}
        restart_result: list[subprocess.CompletedProcess] = []

        restart_seconds: list[float] = []

        def restart_node_a() -> None:
            t0 = time.monotonic()
            restart_result.append(subprocess.run(restart, capture_output=True, text=True, timeout=120))
            restart_seconds.append(time.monotonic() - t0)

        restarter = threading.Thread(target=restart_node_a)
        for i in range(SENDS):
            text = f"compose e2e {i} {uuid.uuid4().hex[:10]}"
            # No auto_approve: the scripted model only echoes (no tool call to approve), and
            # bridges relay producers' auto_approve only when started to allow it.
            cid = client.send(text)
            texts[cid] = text
            if i == SENDS // 4:
                restarter.start()
            time.sleep(0.25)
        restarter.join()
        result = restart_result[0]
        check("restart node-a", result.returncode == 0,
              f"{' '.join(restart)} -> {result.returncode} {result.stderr.strip()[-300:]}")
        # The node drains and exits on SIGTERM: the restart is not the stop timeout's SIGKILL.
        check("restart node-a.drained", restart_seconds[0] < DRAIN_BOUND,
              f"stop + start took {restart_seconds[0]:.1f} s (drain timeout 25 s, SIGKILL at 40 s)")

        # Every send: exactly one turn_complete, with its own text.
        def settled():
            events = stream_events(r)
            done = {}
            for ws, e in events:
                if e.get("type") == "turn_complete" and e.get("correlation_id") in texts:
                    done.setdefault(e["correlation_id"], []).append((ws, e.get("content", "")))
            return done if len(done) == len(texts) else None

        done = wait_until(f"all {SENDS} sends answered", 180, settled) or {}
        # Give a duplicate the chance to show up before counting.
        time.sleep(3)
        done = settled() or done
        lost = [cid for cid in texts if cid not in done]
        duplicated = {cid: v for cid, v in done.items() if len(v) > 1}
        wrong = {cid: v for cid, v in done.items() if not all(texts[cid] in content for _ws, content in v)}
        check("sends.lost", not lost, f"{len(lost)} of {SENDS} lost: {lost[:5]}")
        check("sends.duplicated", not duplicated, f"{len(duplicated)} duplicated: {list(duplicated.items())[:3]}")
        check("sends.content", not wrong, f"{len(wrong)} with another text: {list(wrong.items())[:3]}")
        owners: dict[str, int] = {}
        for v in done.values():
            owner = r.get(f"{PREFIX}:ws:{v[0][0]}") or "?"
            owners[owner] = owners.get(owner, 0) + 1
        check("sends.exactly_once", True, f"{SENDS} sends, {SENDS} turns; workstreams by owner: {owners}")
        dead = r.lrange(f"{PREFIX}:dead", 0, -1)
        check("dead_letters", not dead, dead[:3])

    with TurnstoneConsole(console_url, token=token) as console:
        nodes = wait_until(
            "console.nodes.after_restart", 60,
            lambda: (n := console.nodes()) and sorted(x.node_id for x in n.nodes if x.reachable) == ["node-a", "node-b"] and n,
        )
        check("console.nodes.after_restart", True, sorted(x.node_id for x in nodes.nodes))

    finish(timer)


if __name__ == "__main__":
    main()
