"""Pushes a burst of sends to one workstream with the original Python MQ client (0.9.6).

Usage: mq_burst.py <redis_host> <redis_port> <count>

Creates a workstream (`create_workstream`, then its id from `ws_created`), subscribes to its
channel, pushes <count> `send`s back to back (no pacing: `client.send`, routed to the
owner's queue as the client does), then waits until a `turn_complete` arrived for each or
the deadline passed. Prints one JSON line: {"ws_id", "sent": [correlation ids in push
order], "completed": [correlation ids of the turn_completes, in arrival order],
"acks": {status: count}}. Exit 0 unless the run could not start.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from turnstone.mq.client import TurnstoneClient
from turnstone.mq.protocol import AckEvent, OutboundEvent, TurnCompleteEvent

from mq_compat import create_ws  # same directory: the script's own is on sys.path

DEADLINE = float(os.environ.get("MQ_BURST_DEADLINE", "150"))


def main() -> None:
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = TurnstoneClient(host=host, port=port)
    ws_id = create_ws(client, "burst", auto_approve=False)  # exits 1 when it fails (plain text: nothing to approve)
    completed: list[str] = []
    acks: dict[str, int] = {}
    lock = threading.Condition()

    def on_ws(event: OutboundEvent) -> None:
        with lock:
            if isinstance(event, TurnCompleteEvent):
                completed.append(event.correlation_id)
                lock.notify_all()
            elif isinstance(event, AckEvent):
                acks[event.status] = acks.get(event.status, 0) + 1

    client.subscribe(on_ws, ws_id=ws_id)
    time.sleep(0.2)  # let the subscription reach Redis
    sent = [client.send(f"burst {i:03d}", ws_id=ws_id) for i in range(count)]
    deadline = time.monotonic() + DEADLINE
    with lock:
        while len(completed) < count and time.monotonic() < deadline:
            lock.wait(timeout=1.0)
        result = {"ws_id": ws_id, "sent": sent, "completed": list(completed), "acks": dict(acks)}
    print(json.dumps(result), flush=True)
    client.close()


if __name__ == "__main__":
    main()
