# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run an unmodified torch program with its models offloaded: RRTO's ``LD_PRELOAD``.

::

    python -m rrto_ros.run --endpoint tcp://edge:5555 --keys-dir ~/.edge_keys app.py ARGS
    python -m rrto_ros.run --start-edge-server app.py ARGS   # try it on loopback

``torch.nn.Module.__call__`` is wrapped: the outermost module call of each forward pass
registers the module's parameters (uploaded once) and runs inside the session, so every
aten operator of the model goes to the edge server, per operator until RRTO has found the
inference sequence and replayed from then on. The call's outputs are read back and the
module state it changed is copied back before it returns, so tensor code outside modules
runs here on host tensors. When the server is gone, stalled or refuses an operator, the
call runs again locally and the program gets the local answer
(:mod:`rrto_ros.offload_runtime`); offloading resumes once the server answers again.

At exit the launcher prints what offloading did (to stderr): inferences offloaded and run
locally with the reasons, round trips, bytes, and RRTO's replay state (or why it is not
replaying). ``--per-inference`` (or ``RRTO_RUN_PER_INFERENCE=1``) prints a line per
inference, ``--stats-file PATH`` (or ``RRTO_RUN_STATS_FILE``) appends a JSON line each.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import runpy
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edge_offload.client import ClientConfig, ConnectionState, EdgeClient
from edge_offload.keys import DEFAULT_KEYS_DIR, ensure_loopback_keys
from edge_offload.server import EdgeServer, ServerConfig
from rrto_ros.offload_runtime import DEFAULT_RETRY_REFUSED_S, InferenceRecord, ModuleOffloader
from rrto_ros.remote import RemoteSession
from rrto_ros.rrto import RrtoSession

# A stalled server is given up on this fast (pings every liveness/4): the inference that
# was waiting runs locally, well within a second of the fault.
DEFAULT_LIVENESS_TIMEOUT_S = 0.6
# A live server may take long (a first inference uploads every parameter).
DEFAULT_REQUEST_TIMEOUT_S = 120.0


@contextlib.contextmanager
def offload_modules(
    session: RemoteSession, *, fallback: bool = False
) -> Iterator[ModuleOffloader]:
    """Run every outermost ``nn.Module`` call inside ``session`` while in the block.

    Each call's outputs come back as host tensors and its module state is synced back
    (see :class:`~rrto_ros.offload_runtime.ModuleOffloader`). With ``fallback`` a failed
    call runs again locally; without, the error reaches the caller.
    """
    with ModuleOffloader(lambda: session, fallback=fallback) as offloader:
        yield offloader


def _transport(client: EdgeClient, mode: str) -> Any:
    def send(op: str, fields: dict, tensors: dict) -> tuple[dict, dict]:
        reply = client.call(mode, op, fields, tensors)
        return reply.fields, reply.tensors

    return send


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    parser = argparse.ArgumentParser(
        prog='rrto-run',
        description='Run a torch program with its nn.Modules offloaded to an edge server.',
        epilog=(
            'Environment: RRTO_RUN_PER_INFERENCE=1 does what --per-inference does; '
            'RRTO_RUN_STATS_FILE=PATH what --stats-file PATH does.'
        ),
    )
    parser.add_argument('--mode', choices=('rrto', 'per_op'), default='rrto')
    parser.add_argument('--endpoint', default='tcp://127.0.0.1:5555', help='edge server')
    parser.add_argument(
        '--keys-dir', type=Path, default=DEFAULT_KEYS_DIR,
        help='CURVE keys: robot.key_secret and server.key (created for --start-edge-server); '
        "default: edge_offload_keygen's folder, %(default)s",
    )  # fmt: skip
    parser.add_argument(
        '--start-edge-server', action='store_true',
        help='also run an edge server in this process on a free loopback port',
    )  # fmt: skip
    parser.add_argument('--min-repeats', type=int, default=3, help='R of the sequence search')
    parser.add_argument(
        '--no-fallback', action='store_true',
        help='let offloading errors reach the program instead of running the call locally',
    )  # fmt: skip
    parser.add_argument(
        '--liveness-timeout', type=float, default=DEFAULT_LIVENESS_TIMEOUT_S,
        help='seconds of server silence after which a call fails and runs locally',
    )  # fmt: skip
    parser.add_argument(
        '--retry-refused-s', type=float, default=DEFAULT_RETRY_REFUSED_S,
        help='seconds a module whose operators the server refused runs locally',
    )  # fmt: skip
    parser.add_argument(
        '--per-inference', action='store_true',
        default=os.environ.get('RRTO_RUN_PER_INFERENCE', '') not in ('', '0'),
        help='print one line per inference (where it ran, round trips, bytes, replay)',
    )  # fmt: skip
    parser.add_argument(
        '--stats-file', type=Path, default=os.environ.get('RRTO_RUN_STATS_FILE') or None,
        help='append one JSON line per inference to this file',
    )  # fmt: skip
    parser.add_argument('--quiet', action='store_true', help='no summary at exit')
    parser.add_argument('script', type=Path, help='the program to run')
    parser.add_argument('args', nargs=argparse.REMAINDER, help="the program's arguments")
    return parser


class _Reporter:
    """Prints and writes the per-inference records the launcher was asked for."""

    def __init__(self, per_inference: bool, stats_file: Path | None) -> None:
        self.per_inference = per_inference
        self.file = stats_file.open('a', buffering=1) if stats_file is not None else None

    def __call__(self, record: InferenceRecord) -> None:
        if self.per_inference:
            print(f'rrto-run: {record.line()}', file=sys.stderr, flush=True)
        if self.file is not None:
            self.file.write(json.dumps({'t': time.monotonic(), **dataclasses.asdict(record)}))
            self.file.write('\n')

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def main(argv: list[str] | None = None) -> int:
    """Run the program; return its exit status."""
    args = build_parser().parse_args(argv)
    if not args.script.is_file():
        print(f'rrto-run: no such program: {args.script}', file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        client = _connect(args, stack)
        reporter = _Reporter(args.per_inference, args.stats_file)
        stack.callback(reporter.close)
        offloader = _offloader(args, client, reporter)
        return _run_program(args, offloader)


def _connect(args: argparse.Namespace, stack: contextlib.ExitStack) -> EdgeClient:
    """Return a client of the edge server (started here with ``--start-edge-server``)."""
    keys_dir = args.keys_dir.expanduser()
    endpoint = args.endpoint
    if args.start_edge_server:
        keys = ensure_loopback_keys(keys_dir)
        server = stack.enter_context(
            EdgeServer(
                ServerConfig(
                    endpoint='tcp://127.0.0.1:0',
                    models=['tiny_cnn'],  # the server needs one; unused here
                    modes=[args.mode],
                    secret_key_file=keys['server_secret'],
                    authorized_clients_dir=keys['authorized'],
                )
            )
        )
        endpoint = server.endpoint
    client = stack.enter_context(
        EdgeClient(
            ClientConfig(
                endpoint=endpoint,
                client_name='rrto-run',
                secret_key_file=str(keys_dir / 'robot.key_secret'),
                server_public_key_file=str(keys_dir / 'server.key'),
                liveness_timeout_s=args.liveness_timeout,
                ping_interval_s=min(0.2, args.liveness_timeout / 4),
                request_timeout_s=DEFAULT_REQUEST_TIMEOUT_S,
            )
        )
    )
    if not client.wait_connected(10.0):
        # Not fatal: the program runs, locally, until the server answers.
        print(
            f'rrto-run: edge server {endpoint} not reachable ({client.state_reason}); '
            'running locally until it is',
            file=sys.stderr,
        )
    return client


def _offloader(
    args: argparse.Namespace, client: EdgeClient, reporter: _Reporter
) -> ModuleOffloader:
    """Return the offloader that patches the program's modules, with its session factory."""
    transport = _transport(client, args.mode)

    def open_session() -> RemoteSession:
        if args.mode == 'rrto':
            session: RemoteSession = RrtoSession(transport, min_repeats=args.min_repeats)
        else:
            session = RemoteSession(transport)
        session.reset_remote()
        return session

    offloader = ModuleOffloader(
        open_session,
        mode=args.mode,
        is_connected=lambda: client.state is ConnectionState.CONNECTED,
        on_inference=reporter,
        fallback=not args.no_fallback,
        retry_refused_s=args.retry_refused_s,
    )
    client.add_state_listener(
        lambda state, reason: (
            offloader.connection_lost() if state is not ConnectionState.CONNECTED else None
        )
    )
    return offloader


def _run_program(args: argparse.Namespace, offloader: ModuleOffloader) -> int:
    """Run the user's program as ``__main__`` under ``offloader``; return its exit status."""
    saved_argv = sys.argv
    sys.argv = [str(args.script), *args.args]
    status = 0
    try:
        with offloader:
            runpy.run_path(str(args.script), run_name='__main__')
    except SystemExit as exit_:
        code = exit_.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv = saved_argv
        if not args.quiet:
            for line in offloader.summary.lines():
                print(f'rrto-run: {line}', file=sys.stderr)
    return status


if __name__ == '__main__':
    sys.exit(main())
