# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The launch files as a user runs them: ``ros2 launch``, the ``ros2`` CLI, Ctrl-C, kill -9.

Each test starts ``ros2 launch`` in a process group of its own (a terminal), with a home
folder of its own whose CURVE keys ``edge_offload_keygen`` made, as the README says, and
the default parameter files. They need the ROS 2 command line (see
:mod:`edge_offload_testing.ros2_cli`); without it they skip, saying why.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import time
from pathlib import Path

import psutil
import pytest
import yaml
from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from arise_ros.latency_profile import BatchLatencyProfile, save_profile
from edge_offload_testing import free_tcp_port, spin_until
from edge_offload_testing.ros2_cli import (
    Ros2Launch,
    require_ros2_cli,
    run_ros2,
    run_ros2_for,
)
from offload_interfaces.msg import PersonArray

LAUNCH_DIR = Path(__file__).resolve().parents[3] / 'src' / 'bringup' / 'launch'
LAUNCH_FILES = sorted(LAUNCH_DIR.glob('*.launch.py'))
VIDEO = 'uri:=asset:media/opencv/vtest.avi'
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
# Every node is gone this long after Ctrl-C (ros_node_main.SHUTDOWN_BUDGET_S is 1.5 s).
EXIT_BOUND_S = 2.0


@pytest.fixture
def user_home(tmp_path, monkeypatch, ros_domain_id) -> Path:
    """Yield a home with the README's keys (``edge_offload_keygen``), in the test's domain."""
    require_ros2_cli()
    home = tmp_path / 'home'
    home.mkdir()
    monkeypatch.setenv('HOME', str(home))
    made = run_ros2('run', 'edge_offload', 'edge_offload_keygen')
    assert made.returncode == 0, made.stdout
    yield home
    run_ros2('daemon', 'stop', timeout_s=30.0)


# Arguments each launch file must offer (every one of them also has a description).
_COMMON = {'namespace', 'use_sim_time', 'autostart', 'log_level'}
EXPECTED_ARGUMENTS = {
    'kapao_tracking.launch.py': _COMMON
    | {'params_file', 'source', 'uri', 'mode', 'model', 'server_endpoint', 'record_path'}
    | {'depth_source', 'record_bag', 'rate_mode', 'start_edge_server', 'follow', 'rviz'}
    | {'cmd_vel_topic', 'odometry_topic', 'depth_image_topic', 'depth_camera_info_topic'},
    'edge_server.launch.py': _COMMON | {'params_file', 'endpoint'},
    'offload_substrate.launch.py': _COMMON
    | {'bridge_params_file', 'server_params_file', 'start_edge_server', 'mode'}
    | {'server_endpoint'},
    'arise_fleet.launch.py': _COMMON
    | {'params_file', 'robots', 'servers', 'host', 'port', 'keys_dir', 'sla', 'fps'}
    | {'drop_rates', 'duration_s', 'start_spacing_s', 'engine'},
}


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda path: path.name)
def test_show_args_lists_every_argument_with_a_description(path):
    require_ros2_cli()
    shown = run_ros2('launch', 'bringup', path.name, '--show-args')
    assert shown.returncode == 0, shown.stdout
    # "    'name':\n        description\n        (default: 'value')"
    entries = re.findall(r"^    '(\w+)':\n((?:        .*\n?)+)", shown.stdout, re.MULTILINE)
    listed = {name: body for name, body in entries}
    assert set(listed) == EXPECTED_ARGUMENTS[path.name], shown.stdout
    for name, body in listed.items():
        description = [line.strip() for line in body.splitlines() if '(default' not in line]
        assert any(description), f'{path.name}: argument {name} has no description'
        assert 'no description given' not in body, f'{path.name}: {name}: {body}'


def _until(ask, expected: str, timeout_s: float = 30.0) -> str:  # noqa: ANN001
    """Return ``ask()``'s answer once it contains ``expected`` (or the last one at timeout)."""
    deadline = time.monotonic() + timeout_s
    answer = ask()
    while expected not in answer and time.monotonic() < deadline:
        time.sleep(1.0)
        answer = ask()
    return answer


def _installed(package: str) -> bool:
    try:
        get_package_share_directory(package)
    except PackageNotFoundError:
        return False
    return True


def _people_watcher(context) -> tuple[Node, list[tuple[float, str]]]:  # noqa: ANN001
    node = Node('launch_system_test', context=context)
    results: list[tuple[float, str]] = []
    node.create_subscription(
        PersonArray,
        'people',
        # With tracking the mode reads '<front end mode>+tracking': keep the front end's.
        lambda m: results.append((time.time(), m.offload_mode.removesuffix('+tracking'))),
        RELIABLE,
    )
    return node, results


def _exits_after_interrupt(launch: Ros2Launch) -> dict[str, tuple[float, int]]:
    """Return each process's exit after Ctrl-C: (seconds after it, exit code)."""
    return {
        event.process: (round(event.time - launch.interrupted_at, 2), event.exit_code)
        for event in launch.events()
        if event.kind == 'exited' and event.time >= launch.interrupted_at
    }


def _assert_clean_interrupt(launch: Ros2Launch, expected: set[str]) -> dict:
    """Ctrl-C the launch: it and every node exit 0, in time, and nothing is left running."""
    code = launch.interrupt()
    exits = _exits_after_interrupt(launch)
    print(f'{launch.name}: exits after Ctrl-C (s, code): {exits}')  # noqa: T201 - the figures
    tail = launch.output()[-3000:]
    assert code == 0, f'ros2 launch exited {code}\n{tail}'
    assert {name.rsplit('-', 1)[0] for name in exits} == expected, exits
    assert all(exit_code == 0 for _, exit_code in exits.values()), f'{exits}\n{tail}'
    escalated = [event for event in launch.events() if 'SIGTERM' in event.text]
    assert not escalated, f'ros2 launch had to send SIGTERM: {escalated}'
    assert launch.processes_left() == [], f'left running: {launch.processes_left()}'
    return exits


def test_readme_one_machine_command_runs_answers_the_cli_and_stops_on_ctrl_c(
    user_home, tmp_path, ros_context, ros_executor
):
    # The README's command as written (RViz, where it is installed), on a free port.
    port = free_tcp_port()
    launch = Ros2Launch(
        [
            'bringup',
            'kapao_tracking.launch.py',
            'source:=video',
            VIDEO,
            'start_edge_server:=true',
            'follow:=false',
            # Without rviz2 the launch says so and runs the graph; with it, a test would
            # open a window.
            f'rviz:={str(not _installed("rviz2")).lower()}',
            f'server_endpoint:=tcp://127.0.0.1:{port}',
        ],
        tmp_path,
        'one_machine',
    )
    try:
        node, results = _people_watcher(ros_context)
        ros_executor.add_node(node)
        offloaded = lambda: any(mode == 'nnto' for _, mode in results)  # noqa: E731
        assert spin_until(ros_executor, offloaded, timeout_s=120.0), (
            f'no offloaded people result; got {results[-5:]}\n{launch.output()[-3000:]}'
        )
        hz = run_ros2_for(8.0, 'topic', 'hz', '/people')
        assert 'average rate:' in hz, f'ros2 topic hz /people said:\n{hz}'
        described = _until(
            lambda: run_ros2('param', 'describe', '/offload_bridge', 'mode').stdout,
            'Offloading mode',
        )
        assert 'Offloading mode' in described, described
        # The ros2 daemon the CLI starts discovers the graph anew: ask until it has.
        actions = _until(lambda: run_ros2('action', 'list').stdout, '/offload')
        assert '/offload' in actions.split(), actions
        for lifecycle_node in ('/edge_server', '/offload_bridge'):
            get_state = lambda n=lifecycle_node: run_ros2('lifecycle', 'get', n).stdout  # noqa: E731
            state = _until(get_state, 'active')
            assert state.startswith('active'), f'{lifecycle_node}: {state}'
        output = launch.output()
        assert 'unknown_model' not in output
        if not _installed('rviz2'):
            assert 'rviz2 is not installed' in output, output[-3000:]
        exits = _assert_clean_interrupt(
            launch,
            {'sensor_source', 'offload_bridge', 'people_detection', 'tracking_monitor'}
            | {'edge_server'},
        )
        slow = {name: exit for name, exit in exits.items() if exit[0] > EXIT_BOUND_S}
        assert not slow, f'exited later than {EXIT_BOUND_S} s after Ctrl-C: {slow}'
    finally:
        launch.close()


def _server_requests(statuses: list[tuple[float, dict[str, str]]], after: float) -> float | None:
    """Return when the edge server first reported a served request after ``after``."""
    for when, values in statuses:
        if when > after and int(values.get('requests_total', 0)) > 0:
            return when
    return None


def test_two_machines_offload_every_frame_and_recover_from_kill_9(
    user_home, tmp_path, ros_context, ros_executor
):
    # Two launches, each in its own process group and on its own CPU: the edge machine
    # and the robot, with their default parameter files; the edge's publishes diagnostics
    # every 0.1 s instead of 1 s, so that when it served again is measured to 0.1 s.
    port = free_tcp_port()
    endpoint = f'tcp://127.0.0.1:{port}'
    cpus = sorted(os.sched_getaffinity(0))
    default = Path(get_package_share_directory('bringup')) / 'config' / 'edge_server.yaml'
    edge_parameters = yaml.safe_load(default.read_text())
    edge_parameters['edge_server']['ros__parameters']['diagnostics_period_s'] = 0.1
    edge_params_file = tmp_path / 'edge_server.yaml'
    edge_params_file.write_text(yaml.safe_dump(edge_parameters))
    edge = Ros2Launch(
        [
            'bringup',
            'edge_server.launch.py',
            f'endpoint:={endpoint}',
            f'params_file:={edge_params_file}',
        ],
        tmp_path,
        'edge',
        cpus=frozenset(cpus[:1]),
    )
    robot = Ros2Launch(
        ['bringup', 'kapao_tracking.launch.py', f'server_endpoint:={endpoint}', 'source:=video']
        + [VIDEO],
        tmp_path,
        'robot',
        cpus=frozenset(cpus[1:] or cpus),
    )
    try:
        node, results = _people_watcher(ros_context)
        statuses: list[tuple[float, dict[str, str]]] = []
        node.create_subscription(
            DiagnosticArray,
            '/diagnostics',
            lambda message: statuses.extend(
                (time.time(), {value.key: value.value for value in status.values})
                for status in message.status
                if status.name.endswith('edge server')
            ),
            RELIABLE,
        )
        ros_executor.add_node(node)

        # 8 results after the front end's first answer ('none': tracked frames before it).
        def answered() -> list[str]:
            modes = [mode for _, mode in results]
            first = next((i for i, mode in enumerate(modes) if mode != 'none'), len(modes))
            return modes[first:]

        assert spin_until(ros_executor, lambda: len(answered()) >= 8, timeout_s=180.0), (
            f'{len(results)} results\n{robot.output()[-3000:]}'
        )
        modes = set(answered())
        assert modes == {'nnto'}, f'people results ran in {modes}, not all offloaded'
        before_kill = robot.output()
        for refusal in ('unknown_model', 'does not serve'):
            assert refusal not in before_kill, f'{refusal!r} in the robot log:\n{before_kill}'
        # A fallback is allowed only for a missed deadline: robot, server and test share
        # 2 cores here, and a late answer is run locally by design (a fresh-clone run saw
        # one depth offload answer after its 0.404 s deadline). Any other reason is a fault.
        lines = before_kill.splitlines()
        fallbacks = [line for line in lines if 'running locally instead' in line]
        assert all('did not answer within' in line for line in fallbacks), '\n'.join(fallbacks)

        # kill -9 of the edge server: frames run on the robot, then offloading resumes
        # after ros2 launch respawns the server (autostart: nobody calls ros2 lifecycle).
        killed_pid = edge.pid_of('edge_server')
        killed_at = time.time()
        os.kill(killed_pid, signal.SIGKILL)
        assert spin_until(
            ros_executor,
            lambda: any(t > killed_at and mode == 'local' for t, mode in results),
            timeout_s=60.0,
        ), f'no local result after the server died\n{robot.output()[-3000:]}'
        respawned = lambda: edge.pid_of('edge_server') != killed_pid  # noqa: E731
        assert spin_until(ros_executor, respawned, timeout_s=30.0), edge.launch_log()
        respawned_at = max(e.time for e in edge.events() if e.kind == 'started')
        assert spin_until(
            ros_executor, lambda: _server_requests(statuses, respawned_at), timeout_s=60.0
        ), f'the respawned server served nothing\n{edge.output()[-3000:]}'
        served_after_s = _server_requests(statuses, respawned_at) - respawned_at
        assert spin_until(
            ros_executor,
            lambda: any(t > respawned_at and mode == 'nnto' for t, mode in results),
            timeout_s=60.0,
        ), f'people results did not go back to nnto\n{robot.output()[-3000:]}'
        people_after_s = min(t for t, m in results if t > respawned_at and m == 'nnto')
        people_after_s -= respawned_at
        print(  # noqa: T201 - the figures of the run
            f'edge server respawned {respawned_at - killed_at:.2f} s after kill -9; '
            f'it served again {served_after_s:.2f} s after the respawn, people results '
            f'offloaded again {people_after_s:.2f} s after it'
        )
        # How soon is a figure (printed above, and the fault benchmark's table), not asserted:
        # on 2 shared cores two CI runs gave 4.95 and 5.41 s (the bridge's reconnect, then the
        # next front-end request). That it serves again at all, unasked, is asserted above.

        # kill -9 of the bridge: ros2 launch respawns it and detection carries on (tracking
        # goes on without it; the respawned bridge is waited for until it is configured,
        # so that Ctrl-C below does not land while it still imports torch).
        configured = robot.output().count('configured: mode')
        bridge_killed_at = time.time()
        os.kill(robot.pid_of('offload_bridge'), signal.SIGKILL)
        assert spin_until(
            ros_executor,
            lambda: robot.output().count('configured: mode') > configured,
            timeout_s=90.0,
        ), f'the bridge was not respawned and configured\n{robot.output()[-3000:]}'
        configured_at = time.time()
        assert spin_until(
            ros_executor, lambda: any(t > configured_at for t, _ in results), timeout_s=90.0
        ), f'no people result after the bridge was killed\n{robot.output()[-3000:]}'
        resumed_s = min(t for t, _ in results if t > bridge_killed_at + 1.0) - bridge_killed_at
        print(  # noqa: T201
            f'people results resumed {resumed_s:.2f} s after the bridge was killed; the '
            f'respawned bridge was configured {configured_at - bridge_killed_at:.2f} s after it'
        )

        _assert_clean_interrupt(
            robot,
            {
                'sensor_source',
                'offload_bridge',
                'people_detection',
                'tracking_monitor',
                'accumo_scheduler',
                'people_tracker',
                'follower',
            },
        )
        _assert_clean_interrupt(edge, {'edge_server'})
    finally:
        robot.close()
        edge.close()


def _two_free_ports() -> int:
    """Return a port that, with the next one, was free a moment ago."""
    for _ in range(50):
        port = free_tcp_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(('127.0.0.1', port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError('no two consecutive free ports')


def _server_pid(launch: Ros2Launch, node: str) -> int | None:
    """Return the pid of the running ``edge_server`` process that is node ``node``.

    ros2 launch names the processes after their executable, not their node.
    """
    for event in reversed(launch.events()):
        if event.kind != 'started' or not event.process.startswith('edge_server-'):
            continue
        try:
            command = Path(f'/proc/{event.pid}/cmdline').read_bytes().split(b'\0')
        except OSError:
            continue  # gone
        if f'__node:={node}'.encode() in command:
            return event.pid
    return None


def _admitted(servers: dict[str, dict[str, tuple[str, dict[str, str]]]], server: str) -> set:
    """Return the robots ``server``'s newest diagnostics report admitted."""
    return {
        name.split('arise robot ', 1)[1]
        for name, (message, _) in servers.get(server, {}).items()
        if 'arise robot ' in name and message.startswith('admitted')
    }


def _arise_fleet_params_file(tmp_path: Path) -> Path:
    """Write the default fleet parameter file with a fixed latency profile, diagnostics 0.2 s.

    With a fixed profile the servers do not spend their start measuring one on a loaded CI
    machine.
    """
    profile = tmp_path / 'profile.yaml'
    save_profile(
        BatchLatencyProfile(
            'accumo_depth',
            {size: 0.04 + 0.03 * size for size in range(1, 9)},
            'test: a fixed CPU-like curve',
        ),
        profile,
    )
    default = Path(get_package_share_directory('bringup')) / 'config' / 'arise_fleet.yaml'
    parameters = yaml.safe_load(default.read_text())
    server = parameters['edge_server']['ros__parameters']
    server['arise']['profile_file'] = str(profile)
    server['diagnostics_period_s'] = 0.2
    params_file = tmp_path / 'arise_fleet.yaml'
    params_file.write_text(yaml.safe_dump(parameters))
    return params_file


def test_arise_fleet_admits_robots_on_two_servers_survives_a_kill_and_stops_on_ctrl_c(
    user_home, tmp_path, ros_context, ros_executor
):
    # The fleet launch as written, with two servers and three robots; the parameter file
    # is the default one with a fixed latency profile and diagnostics every 0.2 s.
    params_file = _arise_fleet_params_file(tmp_path)
    port = _two_free_ports()
    launch = Ros2Launch(
        [
            'bringup',
            'arise_fleet.launch.py',
            'robots:=3',
            'servers:=2',
            f'port:={port}',
            f'params_file:={params_file}',
            f'keys_dir:={tmp_path / "fleet_keys"}',
        ],
        tmp_path,
        'arise_fleet',
    )
    try:
        node = Node('arise_fleet_watcher', context=ros_context)
        # Each server's newest statuses (a message carries all of one server's).
        servers: dict[str, dict[str, tuple[str, dict[str, str]]]] = {}

        def on_diagnostics(message: DiagnosticArray) -> None:
            for status in message.status:
                server = status.name.split(':', 1)[0]
                if server.startswith('edge_server_'):
                    servers[server] = {}
            for status in message.status:
                server = status.name.split(':', 1)[0]
                if server.startswith('edge_server_'):
                    servers[server][status.name] = (
                        status.message,
                        {value.key: value.value for value in status.values},
                    )

        node.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, RELIABLE)
        ros_executor.add_node(node)
        robots = {'robot_0', 'robot_1', 'robot_2'}
        # Robot i starts on server i mod 2: the fleet is spread over both.
        spread = lambda: (  # noqa: E731
            _admitted(servers, 'edge_server_0') == {'robot_0', 'robot_2'}
            and _admitted(servers, 'edge_server_1') == {'robot_1'}
        )
        assert spin_until(ros_executor, spread, timeout_s=90.0), (
            f'{servers}\n{launch.output()[-3000:]}'
        )
        fleet = servers['edge_server_0']['edge_server_0: arise fleet'][1]
        assert fleet['admitted'] == '2', fleet
        assert fleet['policy'] == 'planned', fleet
        assert fleet['latency profile'] == 'test: a fixed CPU-like curve', fleet
        robot = servers['edge_server_1']['edge_server_1: arise robot robot_1'][1]
        assert robot['sla'] == '0.0400', robot
        assert int(robot['interval (frames)']) >= 1, robot
        assert float(robot['estimated drop']) <= 0.04, robot

        # kill -9 of server 0: its robots join server 1 (running locally meanwhile), and
        # ros2 launch respawns server 0, which configures itself and reports again.
        killed_pid = _server_pid(launch, 'edge_server_0')
        os.kill(killed_pid, signal.SIGKILL)
        moved = lambda: _admitted(servers, 'edge_server_1') == robots  # noqa: E731
        assert spin_until(ros_executor, moved, timeout_s=30.0), (
            f'{servers}\n{launch.output()[-3000:]}'
        )
        assert spin_until(
            ros_executor,
            lambda: _server_pid(launch, 'edge_server_0') not in (None, killed_pid),
            timeout_s=30.0,
        ), launch.launch_log()
        servers.pop('edge_server_0', None)
        # (and Ctrl-C below does not land while it still imports torch)
        assert spin_until(ros_executor, lambda: 'edge_server_0' in servers, timeout_s=60.0), (
            launch.output()[-3000:]
        )

        _assert_clean_interrupt(launch, {'edge_server', *robots})
        summaries = [
            json.loads(line.split('] ', 1)[1])
            for line in launch.output().splitlines()
            if line.startswith('[robot_') and '"server_results"' in line
        ]
        assert {summary['name'] for summary in summaries} == robots, launch.output()[-3000:]
        for summary in summaries:
            assert summary['server_results'] > 0, summary
            # A frame in flight when its server is killed, or when Ctrl-C stops the server
            # before the robot, is lost with the connection (the robot tracks on); no other.
            assert summary['failed'] <= 2, json.dumps(summary)
            lost = 'connection to the edge server lost'
            assert all(lost in failure for failure in summary['failures']), json.dumps(summary)
            assert summary['longest_gap_s'] < 2.0, summary
    finally:
        launch.close()


def _free_port_block(size: int) -> int:
    """Return a port that, with the next ``size - 1``, was free a moment ago."""
    for _ in range(50):
        port = free_tcp_port()
        if port + size > 65535:
            continue
        with contextlib.ExitStack() as probes:
            try:
                for offset in range(1, size):
                    probe = probes.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    probe.bind(('127.0.0.1', port + offset))
            except OSError:
                continue
        return port
    raise RuntimeError(f'no {size} consecutive free ports')


def _ray_processes(started: float) -> list[psutil.Process]:
    """Return the running raylet and gcs_server processes created after ``started``."""
    found = []
    for process in psutil.process_iter(['name', 'cmdline', 'create_time', 'status']):
        info = process.info
        text = ' '.join([info['name'] or '', *(info['cmdline'] or [])])
        if (
            ('raylet' in text or 'gcs_server' in text)
            and (info['create_time'] or 0.0) >= started
            and info['status'] != psutil.STATUS_ZOMBIE
        ):
            found.append(process)
    return found


def test_arise_fleet_on_ray_admits_robots_shows_them_on_diagnostics_and_stops_on_ctrl_c(
    user_home, tmp_path, ros_context, ros_executor
):
    # engine:=ray: one arise_fleet_node runs two ARISE servers as Ray actors behind the
    # front door; its /diagnostics carries each server's statuses, fetched through Ray.
    # Ctrl-C: every process exits 0 in time, and none of Ray's is left.
    started = time.time() - 1.0  # create_time has a tick's resolution
    port = _free_port_block(3)
    launch = Ros2Launch(
        [
            'bringup',
            'arise_fleet.launch.py',
            'engine:=ray',
            'robots:=2',
            'servers:=2',
            f'port:={port}',
            f'params_file:={_arise_fleet_params_file(tmp_path)}',
            f'keys_dir:={tmp_path / "fleet_keys"}',
        ],
        tmp_path,
        'arise_fleet_ray',
    )
    try:
        node = Node('arise_ray_fleet_watcher', context=ros_context)
        # The fleet node's newest statuses: name -> (message, values).
        statuses: dict[str, tuple[str, dict[str, str]]] = {}

        def on_diagnostics(message: DiagnosticArray) -> None:
            if any(status.name.startswith('arise_fleet: ') for status in message.status):
                statuses.clear()
                statuses.update(
                    (status.name, (status.message, {v.key: v.value for v in status.values}))
                    for status in message.status
                )

        node.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, RELIABLE)
        ros_executor.add_node(node)
        robots = {'robot_0', 'robot_1'}

        def admitted() -> set[str]:
            # 'arise_fleet: arise_server_N: arise robot NAME', from the server's Ray actor.
            return {
                name.rsplit('arise robot ', 1)[1]
                for name, (message, _) in statuses.items()
                if re.fullmatch(r'arise_fleet: arise_server_[01]: arise robot \w+', name)
                and message.startswith('admitted')
            }

        assert spin_until(ros_executor, lambda: admitted() == robots, timeout_s=90.0), (
            f'{statuses}\n{launch.output()[-3000:]}'
        )
        admitted_after_s = time.time() - started
        fleet = statuses['arise_fleet: ray fleet']
        assert fleet[1]['servers answering'] == '2', fleet
        assert fleet[1]['front door'] == f'tcp://127.0.0.1:{port}', fleet
        front_door = statuses['arise_fleet: fleet']
        assert front_door[1]['servers up'] == '2', front_door
        for index in (0, 1):
            server = statuses[f'arise_fleet: arise_server_{index}: arise fleet'][1]
            assert server['latency profile'] == 'test: a fixed CPU-like curve', server
        ray = _ray_processes(started)
        assert ray, 'no raylet or gcs_server process while the fleet runs'

        exits = _assert_clean_interrupt(launch, {'arise_fleet_node', *robots})
        output = launch.output()
        assert 'clean-up still running' not in output, output[-3000:]
        stopped = re.search(r'fleet and Ray stopped in ([\d.]+) s', output)
        assert stopped, output[-3000:]
        _, alive = psutil.wait_procs(
            _ray_processes(started), timeout=max(0.0, launch.interrupted_at + 10.0 - time.time())
        )
        assert not alive, f"Ray's processes left running: {alive}"
        killed = re.search(r'killing \d+ Ray process\(es\)[^\n]*', output)
        print(  # noqa: T201 - the figures of the run
            f'robots admitted {admitted_after_s:.1f} s after the start; fleet and Ray stopped '
            f'in {stopped[1]} s; the fleet node exited {exits["arise_fleet_node-1"][0]} s '
            f'after Ctrl-C; {killed[0] if killed else "no Ray process had to be killed"}'
        )
    finally:
        launch.close()
