"""Drives a Turnstone console with the original Python console SDK (turnstone 0.9.6),
unchanged: `turnstone.sdk.TurnstoneConsole`.

Usage: console_compat.py <base_url> <token> <emptier_node_id> <other_node_id>

The console must know exactly two nodes; `emptier_node_id` has the most free capacity.
Prints one `ok <check>: <detail>` line per passed check and exits 0; on the first failed
check prints `FAIL <check>: <detail>` and exits 1. A watchdog exits 2 after DEADLINE seconds.
Run by console/tests/suite/python_sdk.rs.
"""

from __future__ import annotations

import sys

from checks import check, finish, start_watchdog
from turnstone.sdk import TurnstoneConsole
from turnstone.sdk.events import ClusterEvent

DEADLINE = 25.0
def main() -> None:
    base_url, token, emptier, other = sys.argv[1:5]
    timer = start_watchdog(DEADLINE)

    with TurnstoneConsole(base_url, token=token) as console:
        health = console.health()
        check("health", health.status == "ok" and health.service == "turnstone-console", health)

        overview = console.overview()
        check("overview.nodes", overview.nodes == 2, overview)
        check("overview.workstreams", overview.workstreams >= 2, overview.workstreams)
        check("overview.states", overview.states.idle >= 2, overview.states)
        check("overview.versions", len(overview.versions) == 1 and not overview.version_drift, overview.versions)

        nodes = console.nodes()
        ids = sorted(n.node_id for n in nodes.nodes)
        check("nodes", nodes.total == 2 and ids == sorted([emptier, other]), ids)
        check("nodes.fields", all(n.reachable and n.server_url.startswith("http") and n.ws_total >= 1 for n in nodes.nodes), nodes.nodes)
        by_name = console.nodes(sort="name", limit=1, offset=1)
        check("nodes.paged", len(by_name.nodes) == 1 and by_name.total == 2, by_name)

        ws = console.workstreams()
        check("workstreams", ws.total == overview.workstreams and ws.page == 1 and ws.per_page == 50, (ws.total, ws.pages))
        check("workstreams.fields", all(w.id and w.node in (emptier, other) for w in ws.workstreams), ws.workstreams[:2])
        only = console.workstreams(node=other, per_page=1, sort="name")
        check("workstreams.filtered", all(w.node == other for w in only.workstreams) and len(only.workstreams) == 1, only)
        found = console.workstreams(search="default")
        check("workstreams.search", found.total >= 2, found.total)

        detail = console.node_detail(emptier)
        check("node_detail", detail.node_id == emptier and detail.reachable and len(detail.workstreams) >= 1, detail.node_id)

        snap = console.snapshot()
        check("snapshot", len(snap.nodes) == 2 and snap.overview.nodes == 2 and snap.timestamp > 0, len(snap.nodes))

        created = console.create_workstream(name="from-python", initial_message="hello")
        check("create_workstream.auto", created.status == "ok" and created.target_node == emptier and len(created.correlation_id) == 12, created)
        directed = console.create_workstream(node_id=other, name="directed")
        check("create_workstream.node", directed.target_node == other, directed)
        pool = console.create_workstream(node_id="pool")
        check("create_workstream.pool", pool.target_node == "pool", pool)

        try:
            console.create_workstream(node_id="no-such-node")
            check("create_workstream.unknown_node", False, "no error")
        except Exception as e:  # TurnstoneAPIError
            check("create_workstream.unknown_node", "404" in str(e) or getattr(e, "status_code", 0) == 404, e)

        stream = console.stream_cluster_events()
        first = next(stream)
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        check("stream_cluster_events.snapshot", isinstance(first, ClusterEvent) and first.type == "snapshot", first.type)

    finish(timer)


if __name__ == "__main__":
    main()
