# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""How a process of the suite stops: SIGINT or SIGTERM once, cleanly and fast (no rclpy).

The contract (the nodes' ``main`` in :mod:`edge_offload.ros_node_main` and the light
processes such as ARISE's emulated robots use it): the first SIGINT or SIGTERM starts one
orderly stop, and the process is gone within :data:`SHUTDOWN_BUDGET_S`, well inside the
5 s ``ros2 launch`` waits before escalating; a watchdog cuts a clean-up that still runs
after :data:`WATCHDOG_S`, printing where it was. Further signals change nothing: Ctrl-C in
a terminal reaches every process of the group and ``ros2 launch`` then sends its own
SIGINT, and that second one must not interrupt the first one's clean-up. Work that cannot
be interrupted (a model running on a worker thread) is not waited for past the budget, and
the process ends with ``os._exit`` (see :func:`finish_process`). A clean-up stuck in native
code that holds the GIL is ended after :data:`HARD_LIMIT_S` by faulthandler's own thread,
with every thread's traceback on stderr and exit code 1, before ``ros2 launch`` escalates.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import NoReturn

# From the first stop signal to the end of the process.
SHUTDOWN_BUDGET_S = 1.5
# A clean-up still running this long after the signal is cut short (a hard bound).
WATCHDOG_S = 1.8
# Past this, a stop that has not ended is stuck without the GIL to run Python: the process
# ends from faulthandler's native thread (exit code 1). Below ros2 launch's 5 s to SIGTERM.
HARD_LIMIT_S = 3.5
# After one signal, how long a finished node waits for the second one (see finish_process).
_SECOND_SIGNAL_WAIT_S = 0.5


class StopRequest:
    """SIGINT and SIGTERM ask the process to stop: the first one counts, later ones are noted.

    Installing it replaces rclpy's signal handling (use ``SignalHandlerOptions.NO`` in
    ``rclpy.init``), so the context stays valid while the node releases what it holds.
    """

    def __init__(self, name: str) -> None:
        """Handle SIGINT and SIGTERM from now on (also when the parent ignored or blocked them)."""
        self._name = name
        self._event = threading.Event()
        self.requested_at: float | None = None
        self.signal_name = ''
        self.signals = 0
        # exec keeps ignored and blocked signals: a parent's choices must not make this
        # process deaf to Ctrl-C or to ros2 launch.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signals += 1
        if not self._event.is_set():
            self.signal_name = signal.Signals(signum).name
            self.set()

    def set(self) -> None:
        """Ask for the stop (a signal, or the program itself); the watchdog starts."""
        if self.requested_at is None:
            self.requested_at = time.monotonic()
            watchdog = threading.Timer(WATCHDOG_S, self._cut_short)
            watchdog.daemon = True
            watchdog.start()
            # The watchdog needs the GIL; this one does not.
            try:
                faulthandler.dump_traceback_later(HARD_LIMIT_S, exit=True)
            except (AttributeError, RuntimeError, ValueError, OSError):
                pass  # no usable stderr to write the tracebacks to: the watchdog only
        self._event.set()

    def _cut_short(self) -> None:
        print(
            f'[{self._name}] clean-up still running {WATCHDOG_S} s after the stop request: '
            'exiting now; it was at:',
            file=sys.stderr,
        )
        # Where the clean-up was stuck, so a slow teardown can be found from the log.
        try:
            sys.stderr.flush()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        except (AttributeError, RuntimeError, ValueError, OSError):
            pass  # no usable stderr: the line above is all there is
        _leave(0)

    def is_set(self) -> bool:
        """Return whether a stop was asked for."""
        return self._event.is_set()


def finish_process(name: str, exit_code: int, stop: StopRequest) -> NoReturn:
    """End the process with ``exit_code`` once the node has shut down (call it last).

    Worker threads get what is left of the shutdown budget to finish; a model running on
    one cannot be interrupted, so past the budget the process ends without it, saying so.
    The process then leaves without Python's finalization: tearing down torch and the DDS
    bindings module by module takes 0.5 s on an idle machine and over a second on busy
    cores, a C++ destructor run there can abort the process ("terminate called without an
    active exception"), and the default signal handlers it puts back would turn a second
    Ctrl-C into "exit code -2". Everything the node writes is flushed and closed by then.
    """
    started = stop.requested_at if stop.requested_at is not None else time.monotonic()
    deadline = started + SHUTDOWN_BUDGET_S
    if stop.signals == 1 and os.getppid() != 1:
        # Ctrl-C in a terminal reaches ros2 launch and every node; launch then signals each
        # node itself. A node already gone by then is reported as "exit code 255": Python's
        # Popen.send_signal reaps it first and asyncio's child watcher finds no child
        # ("Unknown child process pid"). So a node with one signal waits a little for the
        # second; ros2 run and a launch's own shutdown send only one.
        second_by = min(deadline, time.monotonic() + _SECOND_SIGNAL_WAIT_S)
        while stop.signals == 1 and time.monotonic() < second_by:
            time.sleep(0.02)
    busy = _busy_threads()
    while busy and time.monotonic() < deadline:
        time.sleep(0.02)
        busy = _busy_threads()
    if busy:
        names = ', '.join(sorted(thread.name for thread in busy))
        print(f'[{name}] not waiting for {len(busy)} busy thread(s): {names}', file=sys.stderr)
    _leave(exit_code)


def _leave(exit_code: int) -> NoReturn:
    """End the process now: flush Python's logging and the standard streams, then _exit."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_code)


def _busy_threads() -> list[threading.Thread]:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]
