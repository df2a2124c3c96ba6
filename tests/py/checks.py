"""The report protocol the Python compatibility scripts share (the Rust tests read it):
one `ok <check>: <detail>` line per passed check; on the first failed check
`FAIL <check>: <detail>` and exit 1; a watchdog that prints `FAIL watchdog: …` and exits 2 when
the whole run overruns its deadline; and a closing `all <n> checks passed` line.
"""

from __future__ import annotations

import os
import sys
import threading

_passed = 0


def check(name: str, condition: bool, detail: object = "") -> None:
    global _passed
    if not condition:
        print(f"FAIL {name}: {detail}", flush=True)
        sys.exit(1)
    _passed += 1
    print(f"ok {name}: {detail}", flush=True)


def start_watchdog(deadline: float) -> threading.Timer:
    """Exits the process (2) once `deadline` seconds have passed; cancel it at the end."""

    def expire() -> None:
        print(f"FAIL watchdog: the run took longer than {deadline} s", flush=True)
        os._exit(2)

    timer = threading.Timer(deadline, expire)
    timer.daemon = True
    timer.start()
    return timer


def finish(timer: threading.Timer, suffix: str = "") -> None:
    """Stops the watchdog and prints the closing line."""
    timer.cancel()
    print(f"all {_passed} checks passed{suffix}", flush=True)
