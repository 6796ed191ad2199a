# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run an unmodified torch program with its models offloaded: RRTO's ``LD_PRELOAD``.

::

    python -m rrto_ros.run --endpoint tcp://edge:5555 --keys-dir ~/.edge_keys app.py ARGS
    python -m rrto_ros.run --start-edge-server app.py ARGS   # try it on loopback

``torch.nn.Module.__call__`` is wrapped: the outermost module call of each forward pass
registers the module's parameters (uploaded once) and runs inside the session, so every
aten operator of the model goes to the edge server, per operator until RRTO has found the
inference sequence and replayed from then on. Tensor code outside modules runs here,
except operators on the model's outputs, which stay on the server until read. At exit
the launcher prints what offloading cost (to stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import runpy
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.keys import ensure_loopback_keys
from edge_offload.server import EdgeServer, ServerConfig
from rrto_ros.remote import RemoteSession
from rrto_ros.rrto import RrtoSession


@contextlib.contextmanager
def offload_modules(session: RemoteSession) -> Iterator[RemoteSession]:
    """Run every outermost ``nn.Module`` call inside ``session`` while in the block."""
    original = nn.Module.__call__
    state = threading.local()

    def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if getattr(state, 'inside', False):
            return original(module, *args, **kwargs)
        session.register_module(module)
        state.inside = True
        try:
            with session.active():
                return original(module, *args, **kwargs)
        finally:
            state.inside = False

    nn.Module.__call__ = call
    try:
        yield session
    finally:
        nn.Module.__call__ = original


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
    )
    parser.add_argument('--mode', choices=('rrto', 'per_op'), default='rrto')
    parser.add_argument('--endpoint', default='tcp://127.0.0.1:5555', help='edge server')
    parser.add_argument(
        '--keys-dir', type=Path, default=Path('~/.edge_offload/keys'),
        help='CURVE keys: robot.key_secret and server.key (created for --start-edge-server)',
    )  # fmt: skip
    parser.add_argument(
        '--start-edge-server', action='store_true',
        help='also run an edge server in this process on a free loopback port',
    )  # fmt: skip
    parser.add_argument('--min-repeats', type=int, default=3, help='R of the sequence search')
    parser.add_argument('--quiet', action='store_true', help='no summary at exit')
    parser.add_argument('script', type=Path, help='the program to run')
    parser.add_argument('args', nargs=argparse.REMAINDER, help="the program's arguments")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the program; return its exit status."""
    args = build_parser().parse_args(argv)
    if not args.script.is_file():
        print(f'rrto-run: no such program: {args.script}', file=sys.stderr)
        return 2
    keys_dir = args.keys_dir.expanduser()
    with contextlib.ExitStack() as stack:
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
                    secret_key_file=str(keys_dir / 'robot.key_secret'),
                    server_public_key_file=str(keys_dir / 'server.key'),
                )
            )
        )
        if not client.wait_connected(10.0):
            print(f'rrto-run: edge server not reachable: {client.state_reason}', file=sys.stderr)
            return 3
        transport = _transport(client, args.mode)
        if args.mode == 'rrto':
            session: RemoteSession = RrtoSession(transport, min_repeats=args.min_repeats)
        else:
            session = RemoteSession(transport)
        session.reset_remote()
        saved_argv = sys.argv
        sys.argv = [str(args.script), *args.args]
        status = 0
        try:
            with offload_modules(session):
                runpy.run_path(str(args.script), run_name='__main__')
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        finally:
            sys.argv = saved_argv
        if not args.quiet:
            stats = session.stats
            line = (
                f'rrto-run: mode {args.mode}: {stats.calls} round trips, {stats.ops} operators, '
                f'{stats.host_reads} host reads, {stats.bytes_up / 1e6:.1f} MB up, '
                f'{stats.bytes_down / 1e6:.1f} MB down'
            )
            if isinstance(session, RrtoSession):
                replay = session.replay_stats
                line += (
                    f'; replayed {replay.passes_replayed} passes, {replay.aborts} aborts, '
                    f'state {session.state.value}'
                )
            print(line, file=sys.stderr)
        return status


if __name__ == '__main__':
    sys.exit(main())
