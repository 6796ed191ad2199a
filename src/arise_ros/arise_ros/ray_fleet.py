# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's fleet of edge servers on Ray: supervised servers and a load balancer.

Ray core (no Serve, no dashboard) places and supervises the servers; robots never see it.

* Each ARISE server is a Ray actor, :class:`EdgeReplica`, whose process runs an edge server
  in-process on a fixed endpoint with the fleet's CURVE key. Ray restarts a replica whose
  process dies (``max_restarts=-1``), on the same endpoint, so the robots' lists stay valid.
  ``gpus_per_server`` makes Ray place each on a GPU of its own.
* The manager (:class:`FleetManager`, the Ray driver) asks every replica for its load each
  ``report_period_s`` and keeps the newest in a
  :class:`~arise_ros.fleet_directory.FleetDirectory`. A replica that does not answer is
  stale after ``stale_after_s`` and no robot is sent to it.
* Robots ask the front door, an edge server serving only the ``fleet`` mode (same keys,
  limits and protocol as every server), ``where`` to go: on start, and whenever their
  server dies, evicts or refuses them (they run locally meanwhile).

Ray is kept off the robots' network (docs/arise_engine.md): an embedded Ray instance binds
loopback only (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, set before ``ray`` is imported) and
requires a token, kept 0600 beside the server keys. A multi-machine cluster
(``ray_address``) belongs on a private network with Ray's token and TLS.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import psutil

from arise_ros.fleet_directory import FleetDirectory, ServerLoad

_logger = logging.getLogger('arise_ros.fleet')
RAY_NAMESPACE = 'arise_fleet'
# The object store holds nothing big here (load reports); Ray's default is 30 % of memory.
_OBJECT_STORE_BYTES = 128 * 1024 * 1024
_RAY_TOKEN_FILE = 'ray_auth_token'  # noqa: S105 - a file name, not a secret
# stop()'s bound when start() fails half-way (the caller learns why from the exception).
_FAILED_START_STOP_S = 5.0
# How long stop() waits for a SIGKILLed Ray process to be reaped.
_REAP_S = 0.3


def prepare_ray_environment(token_dir: Path, loopback_only: bool = True) -> Path:
    """Set Ray's security settings in the environment; call before ``import ray``.

    Returns the token file (created, mode 0600, when missing). Ray reads these settings at
    import and passes them to the processes it starts.
    """
    token_file = token_dir / _RAY_TOKEN_FILE
    if 'ray' in sys.modules:
        # A second start in one process (a lifecycle node configured again after cleanup)
        # finds Ray imported with these very settings; any other settings come too late.
        loopback = os.environ.get('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER') == '0'
        if os.environ.get('RAY_AUTH_TOKEN_PATH') == str(token_file) and (
            loopback or not loopback_only
        ):
            return token_file
        raise RuntimeError('prepare_ray_environment must run before ray is imported')
    token_dir.mkdir(parents=True, exist_ok=True)
    if not token_file.is_file():
        descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, 'w') as stream:
            stream.write(secrets.token_hex(32))
    if loopback_only:
        # Ray binds the node's routable address otherwise, and rewrites 127.0.0.1 to it.
        os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'
    os.environ['RAY_AUTH_MODE'] = 'token'
    os.environ['RAY_AUTH_TOKEN_PATH'] = str(token_file)
    os.environ.setdefault('RAY_USAGE_STATS_ENABLED', '0')
    return token_file


def status_records(statuses: Iterable[Any]) -> list[dict[str, Any]]:
    """Return server mode statuses (``ModeStatus``) as plain dicts, as Ray carries them."""
    return [
        {
            'name': status.name,
            'level': status.level,
            'message': status.message,
            'values': dict(status.values),
            'hardware_id': getattr(status, 'hardware_id', '') or '',
        }
        for status in statuses
    ]


class EdgeReplica:
    """One ARISE server in a Ray actor's process (made a Ray actor by the manager)."""

    def __init__(self, server_id: str, server_config: Mapping[str, Any], endpoint: str) -> None:
        from edge_offload.server import EdgeServer, ServerConfig

        self.server_id = server_id
        self._server = EdgeServer(ServerConfig.from_mapping(dict(server_config)))
        bound = self._server.start()
        self.endpoint = endpoint or bound
        _logger.info('ARISE server %s serving on %s (pid %d)', server_id, bound, os.getpid())

    def load(self) -> dict[str, Any]:
        """Return the ARISE mode's load, with this server's id, endpoint and process id."""
        return {
            **self._server.served_mode('arise').load(),
            'server_id': self.server_id,
            'endpoint': self.endpoint,
            'incarnation': os.getpid(),
            'serving': self._server.serving,
        }

    def diagnostics(self) -> list[dict[str, Any]]:
        """Return the server's mode statuses as plain data (for the manager's view)."""
        return status_records(self._server.mode_diagnostics())

    def stop(self) -> None:
        self._server.stop()


@dataclass
class FleetConfig:
    """The fleet: how many servers, where, with which settings and keys."""

    # The edge server parameters of every replica (an ``edge_server`` section; see
    # arise_fleet.yaml); endpoint, server_id and the key files are set per replica.
    server_parameters: dict[str, Any]
    servers: int = 2
    host: str = '127.0.0.1'
    # The front door binds this port; server i binds port + 1 + i.
    port: int = 5600
    secret_key_file: str = ''
    authorized_clients_dir: str = ''
    # '' = an embedded single-machine Ray instance (loopback only); else a Ray address.
    ray_address: str = ''
    ray_cpus: int = 2
    cpus_per_server: float = 0.0
    gpus_per_server: float = 0.0
    report_period_s: float = 0.2
    stale_after_s: float = 0.6
    front_door_parameters: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if not 1 <= self.servers <= 64:
            raise ValueError(f'servers must be 1..64, got {self.servers}')
        if not 1 <= self.port <= 65535 - 1 - self.servers:
            raise ValueError(f'port {self.port} leaves no room for {self.servers} servers')
        if not 0.01 <= self.report_period_s < self.stale_after_s:
            raise ValueError('report_period_s must be at least 0.01 s and below stale_after_s')
        if self.cpus_per_server < 0 or self.gpus_per_server < 0 or self.ray_cpus < 1:
            raise ValueError('CPU and GPU counts must be >= 0 (ray_cpus >= 1)')
        if 'arise' not in self.server_parameters.get('modes', []):
            raise ValueError("the servers' parameters must serve the 'arise' mode")
        from edge_offload.server import ServerConfig

        # Here, not in the replicas' processes, where Ray would retry a bad setting forever.
        ServerConfig.from_mapping(self.replica_parameters(0)).validate()

    def endpoint(self, index: int) -> str:
        """Return server ``index``'s endpoint (-1: the front door's)."""
        return f'tcp://{self.host}:{self.port + 1 + index}'

    def server_id(self, index: int) -> str:
        """Return server ``index``'s id (its Ray actor's name, its statuses' prefix)."""
        return f'arise_server_{index}'

    def replica_parameters(self, index: int) -> dict[str, Any]:
        """Return server ``index``'s edge server parameters."""
        return dict(
            self.server_parameters,
            endpoint=self.endpoint(index),
            server_id=self.server_id(index),
            secret_key_file=self.secret_key_file,
            authorized_clients_dir=self.authorized_clients_dir,
        )


class FleetManager:
    """Start the replicas on Ray, keep their load in a directory, serve the front door."""

    def __init__(self, config: FleetConfig, token_dir: Path) -> None:
        config.validate()
        self.config = config
        self._token_dir = token_dir
        self._replicas: dict[str, Any] = {}
        self._front_door = None
        self.directory: FleetDirectory | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ray = None
        self._ray_processes: list[psutil.Process] = []

    @property
    def front_door_endpoint(self) -> str:
        return self.config.endpoint(-1)

    @property
    def embedded(self) -> bool:
        """Whether this manager runs Ray itself (no ``ray_address``)."""
        return not self.config.ray_address

    def start(self) -> None:
        """Start Ray, the replicas and the front door (the replicas load their models).

        A bad setting, a missing key file or a port in use raises (ValueError,
        KeyFileError, OSError) with nothing left running.
        """
        config = self.config
        self._stop.clear()
        from edge_offload.server import EdgeServer, ServerConfig

        # The front door first: it loads the fleet's keys, so a missing one fails here,
        # before Ray starts.
        front_door = ServerConfig.from_mapping(
            {
                **config.front_door_parameters,
                'endpoint': self.front_door_endpoint,
                'server_id': 'arise_fleet',
                'models': [],
                'modes': ['fleet'],
                'mode_options': {'fleet': {'stale_after_s': config.stale_after_s}},
                'secret_key_file': config.secret_key_file,
                'authorized_clients_dir': config.authorized_clients_dir,
            }
        )
        self._front_door = EdgeServer(front_door)
        self.directory = self._front_door.served_mode('fleet').directory
        try:
            self._start_ray()
            self._front_door.start()
        except BaseException:
            self.stop(timeout_s=_FAILED_START_STOP_S)
            raise
        self._thread = threading.Thread(target=self._poll, name='arise-fleet-poll', daemon=True)
        self._thread.start()

    def _start_ray(self) -> None:
        config = self.config
        prepare_ray_environment(self._token_dir, loopback_only=self.embedded)
        import ray

        self._ray = ray
        before = {process.pid for process in _children(recursive=False)}
        ray.init(
            address=config.ray_address or None,
            num_cpus=None if config.ray_address else config.ray_cpus,
            include_dashboard=False,
            namespace=RAY_NAMESPACE,
            object_store_memory=None if config.ray_address else _OBJECT_STORE_BYTES,
            log_to_driver=True,
        )
        if self.embedded:
            # The processes ray.init started (GCS, raylet, agents), so that stop() can make
            # sure they and theirs (the replicas are the raylet's children) all end.
            self._ray_processes = [
                process for process in _children(recursive=False) if process.pid not in before
            ]
        replica_class = ray.remote(
            num_cpus=config.cpus_per_server,
            num_gpus=config.gpus_per_server,
            max_restarts=-1,
            max_task_retries=0,
        )(EdgeReplica)
        for index in range(config.servers):
            server_id = config.server_id(index)
            self._replicas[server_id] = replica_class.options(name=server_id).remote(
                server_id, config.replica_parameters(index), config.endpoint(index)
            )

    def replica(self, server_id: str) -> Any:
        """Return the Ray actor handle of a replica (for tests and tools)."""
        return self._replicas[server_id]

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until every replica has reported; False at the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.directory is not None and len(self.directory.live(time.monotonic())) == len(
                self._replicas
            ):
                return True
            time.sleep(0.05)
        return False

    def _poll(self) -> None:
        ray = self._ray
        period = self.config.report_period_s
        while not self._stop.wait(period):
            pending = {
                replica.load.remote(): server_id for server_id, replica in self._replicas.items()
            }
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=period)
            for reference in ready:
                server_id = pending[reference]
                try:
                    load = ray.get(reference, timeout=0)
                    self.directory.report(
                        ServerLoad(
                            server_id=server_id,
                            endpoint=load['endpoint'],
                            admitted=int(load['admitted']),
                            waiting=int(load['waiting']),
                            idle_share=float(load['idle_share']),
                            max_clients=int(load['max_clients']),
                            reported_s=time.monotonic(),
                            incarnation=int(load['incarnation']),
                        )
                    )
                except (ray.exceptions.RayError, KeyError, ValueError) as error:
                    # Down or restarting: stale soon; say why once per episode.
                    _logger.warning('ARISE server %s did not report: %s', server_id, error)
                    self.directory.mark_down(server_id)
            for reference in pending:
                if reference not in ready:
                    ray.cancel(reference)

    def replica_diagnostics(self, timeout_s: float) -> dict[str, list[dict[str, Any]]]:
        """Return each replica's mode statuses (``status_records``), by server id.

        Asks every replica at once and waits at most ``timeout_s``; a replica that does
        not answer in time (down, restarting, busy) is left out. The caller waits up to
        ``timeout_s``: a ROS node calls it off its executor's threads.
        """
        ray = self._ray
        if ray is None or self._stop.is_set() or not self._replicas:
            return {}
        pending = {
            replica.diagnostics.remote(): server_id
            for server_id, replica in self._replicas.items()
        }
        ready, late = ray.wait(list(pending), num_returns=len(pending), timeout=timeout_s)
        answers = {}
        for reference in ready:
            try:
                answers[pending[reference]] = ray.get(reference, timeout=0)
            except ray.exceptions.RayError:
                continue  # died meanwhile: the front door's statuses say it is not up
        for reference in late:
            ray.cancel(reference)
        return dict(sorted(answers.items()))

    def front_door_diagnostics(self) -> list[dict[str, Any]]:
        """Return the front door's statuses (``status_records``): the fleet, each server up."""
        front_door = self._front_door
        return [] if front_door is None else status_records(front_door.mode_diagnostics())

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop polling, the front door, the replicas and Ray; idempotent.

        With ``timeout_s`` it returns within about that long, and no process of an
        embedded Ray instance is left running: Ray's own shutdown gets what is left of the
        time, then every Ray process still running is killed. Without, Ray's shutdown
        takes as long as it needs (each Ray process gets 1 s to end after SIGTERM).
        """
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else 60.0)
        self._stop.set()
        if self._thread is not None:
            # At most one load poll: report_period_s.
            self._thread.join(min(2.0, _left(deadline) / 2))
            self._thread = None
        if self._front_door is not None:
            self._front_door.stop()
        ray = self._ray
        if ray is not None and ray.is_initialized():
            for replica in self._replicas.values():
                try:
                    ray.kill(replica, no_restart=True)
                except ray.exceptions.RayError as error:
                    _logger.info('ARISE server not killed through Ray (%s): ended below', error)
            # Before Ray's shutdown, while the replicas are still the raylet's children.
            processes = _with_descendants(self._ray_processes)
            # Ray stops the GCS before the autoscaler monitor, whose SIGTERM handler then
            # waits on the gone GCS until Ray SIGKILLs it a second later: most of the time
            # Ray's shutdown takes. An embedded instance scales nothing: end it first.
            _kill(process for process in processes if _is_autoscaler_monitor(process))
            # In a thread, so that a Ray stuck on a dead peer cannot hold the caller past
            # the deadline; the processes are ended below either way.
            shutdown = threading.Thread(target=ray.shutdown, name='ray-shutdown', daemon=True)
            shutdown.start()
            shutdown.join(_left(deadline))
            if processes:
                _, alive = psutil.wait_procs(processes, timeout=_left(deadline))
                if alive:
                    _logger.warning(
                        'killing %d Ray process(es) still running at the stop deadline: %s',
                        len(alive),
                        ', '.join(str(process.pid) for process in alive),
                    )
                    _kill(alive)
                    psutil.wait_procs(alive, timeout=_REAP_S)
        self._replicas.clear()
        self._ray_processes = []
        self._ray = None


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _children(recursive: bool) -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=recursive)
    except psutil.Error:
        return []


def _with_descendants(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Return ``processes`` still running, and their descendants."""
    found = {}
    for process in processes:
        try:
            for member in (process, *process.children(recursive=True)):
                found[member.pid] = member
        except psutil.Error:
            continue  # gone
    return list(found.values())


def _is_autoscaler_monitor(process: psutil.Process) -> bool:
    try:
        return any('autoscaler' in part and 'monitor' in part for part in process.cmdline())
    except psutil.Error:
        return False


def _kill(processes: Iterable[psutil.Process]) -> None:
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass  # gone already


def main(argv: list[str] | None = None) -> NoReturn:
    """Run an ARISE fleet on Ray until SIGINT/SIGTERM (console script ``arise_fleet``)."""
    from edge_offload.keys import AUTHORIZED_CLIENTS_SUBDIR, expand_path
    from edge_offload.server import load_params_file

    parser = argparse.ArgumentParser(
        prog='arise_fleet',
        description='ARISE edge servers supervised by Ray, with a load-balancing front door.',
    )
    parser.add_argument(
        '--params-file', required=True, help="edge server parameters (arise_fleet.yaml's)"
    )
    parser.add_argument('--servers', type=int, default=2)
    parser.add_argument('--host', default='127.0.0.1', help='address servers bind and robots use')
    parser.add_argument('--port', type=int, default=5600, help='front door; server i: +1+i')
    parser.add_argument(
        '--keys-dir',
        required=True,
        help='server.key_secret and authorized_clients/ (edge_offload_keygen makes them)',
    )
    parser.add_argument('--ray-address', default='', help="'' = embedded, loopback-only Ray")
    parser.add_argument('--gpus-per-server', type=float, default=0.0)
    parser.add_argument('--log-level', default='INFO')
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format='[%(levelname)s] %(message)s')
    # Not StopRequest's 1.8 s watchdog: no ros2 launch waits on this process, so the
    # manager's stop gets the time it needs (0.4-0.5 s measured; more on a loaded machine).
    # The arise_fleet node bounds it instead (fleet_node.RAY_STOP_BUDGET_S).
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    keys = expand_path(args.keys_dir)
    parameters = load_params_file(args.params_file, 'edge_server')
    parameters.pop('diagnostics_period_s', None)
    config = FleetConfig(
        server_parameters=parameters,
        servers=args.servers,
        host=args.host,
        port=args.port,
        secret_key_file=str(keys / 'server.key_secret'),
        authorized_clients_dir=str(keys / AUTHORIZED_CLIENTS_SUBDIR),
        ray_address=args.ray_address,
        gpus_per_server=args.gpus_per_server,
    )
    manager = FleetManager(config, keys)
    try:
        manager.start()
        ready = manager.wait_ready(120.0)
        print(  # noqa: T201 - the line a script waits for
            f'arise_fleet: front door {manager.front_door_endpoint}, '
            f'{args.servers} server(s) {"ready" if ready else "not all ready"}',
            flush=True,
        )
        while not stop.is_set():
            time.sleep(0.1)
    finally:
        manager.stop()
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: a late second signal must not turn into -2


if __name__ == '__main__':
    main()
