# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Rosbag workflow over DDS: record a run, then the evaluator reproduces its metrics file.

The test plays the graph (``people``, ``link_state``, ``tracks``, ``target``, ``cmd_vel``,
``follower/state``, ``estop``) in its own ROS domain; the bag recorder writes the bag and,
when closed, ``metrics.json``. ``bag_evaluate BAG --check metrics.json`` must reproduce
that file exactly (exit 0) and reject a tampered one (exit 1).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from geometry_msgs.msg import PointStamped, Twist, Vector3
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from std_msgs.msg import Bool, String

from edge_offload_testing import node_command, spin_until, wait_for_subscribers
from offload_interfaces.msg import LinkState, Person, PersonArray
from people_following import bag_evaluator, bag_recorder_node
from people_following.bag_recorder_node import RUN_TOPICS, BagRecorderNode

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class RunPlayer:
    """Publishes a short, known run on the topics the recorder listens to."""

    # Messages play() publishes: people, tracks, link_state, target, cmd_vel, state, estop.
    MESSAGES = 5 + 5 + 3 + 4 + 6 + 2 + 2

    def __init__(self, node: Node) -> None:
        self.node = node
        self.people = node.create_publisher(PersonArray, 'people', RELIABLE)
        self.tracks = node.create_publisher(PersonArray, 'tracks', RELIABLE)
        self.link = node.create_publisher(LinkState, 'link_state', RELIABLE)
        self.target = node.create_publisher(PointStamped, 'target', RELIABLE)
        self.cmd_vel = node.create_publisher(Twist, 'cmd_vel', RELIABLE)
        self.state = node.create_publisher(String, 'follower/state', LATCHED)
        self.estop = node.create_publisher(Bool, 'estop', LATCHED)
        self.publishers = [
            self.people, self.tracks, self.link, self.target, self.cmd_vel, self.state, self.estop
        ]  # fmt: skip

    def play(self) -> None:
        now = self.node.get_clock().now()
        for i in range(5):
            stamp = (now - Duration(seconds=0.05 * (5 - i))).to_msg()
            people = PersonArray(model_name='kapao', model_is_trained=True)
            people.header.stamp = stamp
            people.offload_mode = 'local' if i == 0 else 'nnto'
            people.people = [Person(track_id=0) for _ in range(i % 3)]
            self.people.publish(people)
            tracks = PersonArray()
            tracks.header.stamp, tracks.header.frame_id = stamp, 'odom'
            tracks.people = [Person(track_id=7)] if i < 4 else []
            self.tracks.publish(tracks)
        for connected in (True, False, True):
            link = LinkState(connected=connected, rtt_s=0.02 if connected else float('nan'))
            link.header.stamp = now.to_msg()
            self.link.publish(link)
        for seconds in (0.0, 0.1, 0.9, 1.0):  # one gap longer than 0.5 s
            target = PointStamped()
            target.header.stamp = (now + Duration(seconds=seconds)).to_msg()
            self.target.publish(target)
        for i in range(6):
            twist = Twist()
            twist.linear.x = 0.1 * i
            self.cmd_vel.publish(twist)
        self.state.publish(String(data='no_target'))
        self.state.publish(String(data='following'))
        self.estop.publish(Bool(data=False))
        self.estop.publish(Bool(data=True))


def _record(executor, context, tmp_path: Path, **parameters) -> tuple[Path, Path, dict]:  # noqa: ANN001
    bag, metrics_file = tmp_path / 'run', tmp_path / 'recorded' / 'metrics.json'
    values = {'output_dir': str(bag), 'metrics_file': str(metrics_file), **parameters}
    recorder = BagRecorderNode(
        context=context,
        parameter_overrides=[Parameter(name, value=value) for name, value in values.items()],
    )
    node = Node('bag_recorder_test', context=context)
    player = RunPlayer(node)
    executor.add_node(recorder)
    executor.add_node(node)
    for publisher in player.publishers:
        assert wait_for_subscribers(executor, publisher, timeout_s=20.0), publisher.topic_name
    player.play()
    assert spin_until(executor, lambda: recorder.received >= RunPlayer.MESSAGES, timeout_s=20.0)
    result = recorder.close()
    recorder.destroy_node()  # closes again: no effect
    node.destroy_node()
    return bag, metrics_file, result


def _check(bag: Path, out: Path, metrics_file: Path, *extra: str) -> int:
    return bag_evaluator.main([str(bag), '--out', str(out), '--check', str(metrics_file), *extra])


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_evaluator_reproduces_the_recorded_metrics(
    ros_context, ros_executor, tmp_path, capsys, storage
):
    bag, metrics_file, result = _record(ros_executor, ros_context, tmp_path, storage=storage)
    assert json.loads(metrics_file.read_text()) == result
    assert metrics_file.with_suffix('.csv').is_file()
    assert result['run']['messages'] == RunPlayer.MESSAGES
    assert result['people']['frames'] == 5
    assert result['people']['offload_modes'] == {'local': 1, 'nnto': 4}
    assert result['people']['latency_ms']['count'] == 5
    assert result['tracks']['distinct_tracks'] == 1
    assert result['tracks']['frames_with_tracks'] == 4
    assert result['link_state']['disconnections'] == 1
    assert result['link_state']['rtt_ms']['mean'] == 20.0
    assert result['target'] == {'messages': 4, 'gaps': 1, 'longest_gap_s': 0.8}
    assert result['cmd_vel']['commands'] == 6
    assert result['cmd_vel']['max_linear_x'] == 0.5
    assert result['follower_state']['final_state'] == 'following'
    assert result['estop'] == {'messages': 2, 'presses': 1, 'pressed_at_end': True}

    out = tmp_path / 'evaluated'
    plots = () if storage == 'mcap' else ('--no-plots',)
    assert _check(bag, out, metrics_file, '--quiet', *plots) == 0
    assert 'reproduced' in capsys.readouterr().out
    assert (out / 'metrics.json').read_text() == metrics_file.read_text()
    assert (out / 'metrics.csv').read_text() == metrics_file.with_suffix('.csv').read_text()
    assert (out / 'metrics.png').is_file() == (storage == 'mcap')

    tampered = json.loads(metrics_file.read_text())
    tampered['people']['latency_ms']['p50'] += 1.0
    tampered['cmd_vel']['commands'] = 7
    tampered_file = tmp_path / 'tampered.json'
    tampered_file.write_text(json.dumps(tampered))
    assert _check(bag, tmp_path / 'again', tampered_file, '--quiet', '--no-plots') == 1
    output = capsys.readouterr().out
    assert 'reproduced' not in output.splitlines()
    assert 'people.latency_ms.p50' in output
    assert 'cmd_vel.commands: expected 7, got 6' in output


def test_recorder_process_writes_bag_and_metrics_on_shutdown(
    ros_context, ros_executor, ros_processes, tmp_path
):
    bag, metrics_file = tmp_path / 'run', tmp_path / 'metrics.json'
    process = ros_processes.start(
        node_command(
            'people_following.bag_recorder_node',
            output_dir=bag,
            metrics_file=metrics_file,
            storage='sqlite3',
            # Quoted: a YAML flow sequence does not take 'a:b' as a plain string.
            topics=["'cmd_vel:geometry_msgs/msg/Twist'", "'follower/state:std_msgs/msg/String'"],
        ),
        name='bag_recorder',
    )
    node = Node('bag_recorder_process_test', context=ros_context)
    cmd_vel = node.create_publisher(Twist, 'cmd_vel', RELIABLE)
    state = node.create_publisher(String, 'follower/state', LATCHED)
    ros_executor.add_node(node)
    for publisher in (cmd_vel, state):
        assert wait_for_subscribers(ros_executor, publisher, timeout_s=60.0), ros_processes.output(
            process
        )
    state.publish(String(data='holding'))
    for _ in range(3):
        cmd_vel.publish(Twist())
    # Acknowledged by the recorder's reader; its callbacks may still be pending at SIGINT, so
    # the counts below are at most what was sent, and the metrics are what the bag holds.
    assert cmd_vel.wait_for_all_acked(Duration(seconds=10.0))
    spin_until(ros_executor, lambda: False, timeout_s=1.0)
    assert ros_processes.stop_all() == {'bag_recorder': 0}, ros_processes.output(process)
    written = re.search(r'(\d+) messages written, 0 dropped', ros_processes.output(process))
    assert written is not None, ros_processes.output(process)
    result = json.loads(metrics_file.read_text())
    assert result['run']['messages'] == int(written.group(1))
    assert result.get('cmd_vel', {}).get('commands', 0) <= 3
    # The installed entry point, as a user runs it.
    command = shutil.which('bag_evaluate') or sys.executable
    prefix = [] if command != sys.executable else ['-m', 'people_following.bag_evaluator']
    args = [str(bag), '--out', str(tmp_path / 'out'), '--check', str(metrics_file)]
    completed = subprocess.run(
        [command, *prefix, *args, '--no-plots'], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().endswith('reproduced')


def test_full_queue_drops_the_oldest_messages_and_counts_them(ros_context, tmp_path):
    recorder = BagRecorderNode(
        context=ros_context,
        parameter_overrides=[
            Parameter('output_dir', value=str(tmp_path / 'run')),
            Parameter('topics', value=['cmd_vel:geometry_msgs/msg/Twist']),
            Parameter('max_queue', value=2),
        ],
    )
    # Hold the writer thread inside its first message while five more arrive.
    writing, release = threading.Event(), threading.Event()
    feed_add = recorder._feed.add

    def slow_add(*args: object) -> None:
        writing.set()
        release.wait(timeout=20.0)
        feed_add(*args)

    recorder._feed.add = slow_add
    commands = [serialize_message(Twist(linear=Vector3(x=float(i)))) for i in range(6)]
    recorder._enqueue(0, commands[0])
    assert writing.wait(timeout=20.0)
    for raw in commands[1:]:
        recorder._enqueue(0, raw)
    release.set()
    result = recorder.close()
    recorder.destroy_node()
    assert (recorder.received, recorder.dropped, recorder.written) == (6, 3, 3)
    # The newest messages are kept: 0 (being written), then 4 and 5.
    assert result['cmd_vel']['commands'] == 3
    assert result['cmd_vel']['max_linear_x'] == 5.0
    assert result['cmd_vel']['mean_abs_linear_x'] == 3.0


def test_recorder_refuses_an_existing_bag_and_bad_topics(ros_context, tmp_path):
    def recorder(**values: object) -> BagRecorderNode:
        return BagRecorderNode(
            context=ros_context,
            parameter_overrides=[Parameter(name, value=value) for name, value in values.items()],
        )

    existing = tmp_path / 'existing'
    existing.mkdir()
    with pytest.raises(ValueError, match='exists: refusing to overwrite'):
        recorder(output_dir=str(existing))
    with pytest.raises(ValueError, match='output_dir is required'):
        recorder()
    new = str(tmp_path / 'new')
    with pytest.raises(ValueError, match=r"'people' is not 'name:package/msg/Type'"):
        recorder(output_dir=new, topics=['people'])
    with pytest.raises(ValueError, match='not a message type'):
        recorder(output_dir=new, topics=['people:PersonArray'])
    with pytest.raises(ValueError, match='no_such_msgs/msg/Thing cannot be imported'):
        recorder(output_dir=new, topics=['x:no_such_msgs/Thing'])
    with pytest.raises(ValueError, match='storage'):
        recorder(output_dir=new, storage='rosbag1')
    assert not Path(new).exists()  # nothing written for a refused configuration


def test_evaluator_exit_codes_for_missing_and_corrupt_bags(tmp_path, capsys):
    out = str(tmp_path / 'out')
    assert bag_evaluator.main([str(tmp_path / 'missing'), '--out', out]) == 2
    assert 'does not exist' in capsys.readouterr().err
    (tmp_path / 'folder').mkdir()
    assert bag_evaluator.main([str(tmp_path / 'folder'), '--out', out]) == 2
    assert 'no metadata.yaml' in capsys.readouterr().err
    corrupt = tmp_path / 'corrupt.mcap'
    corrupt.write_bytes(b'not an mcap file')
    assert bag_evaluator.main([str(corrupt), '--out', out]) == 2
    assert 'cannot be read' in capsys.readouterr().err
    bad_check = tmp_path / 'bad.json'
    bad_check.write_text('{')
    assert bag_evaluator.main([str(corrupt), '--out', out, '--check', str(bad_check)]) == 2


def test_empty_bag_and_unknown_types_are_reported_not_fatal(tmp_path, capsys):
    from rosbags.rosbag2 import Writer

    # A bag with an empty people topic and a message of a type nobody can import.
    typestore = bag_recorder_node.bag_typestore(['offload_interfaces/msg/PersonArray'])
    bag = tmp_path / 'odd'
    with Writer(bag, version=9) as writer:
        writer.add_connection('/people', 'offload_interfaces/msg/PersonArray', typestore=typestore)
        unknown = writer.add_connection(
            '/cmd_vel', 'robot_msgs/msg/Drive', msgdef='float64 speed', rihs01='RIHS01_' + '0' * 64
        )
        writer.write(unknown, 5, b'\x00\x01\x00\x00' + bytes(8))
        writer.write(unknown, 6, b'\x00\x01\x00\x00' + bytes(8))
    out = tmp_path / 'out'
    assert bag_evaluator.main([str(bag), '--out', str(out), '--quiet']) == 0
    captured = capsys.readouterr()
    assert captured.err.count('robot_msgs/msg/Drive cannot be imported') == 1
    metrics = json.loads((out / 'metrics.json').read_text())
    assert metrics['run']['topics'] == {'/cmd_vel': 2}
    assert 'cmd_vel' not in metrics
    assert (out / 'metrics.png').is_file()

    empty = tmp_path / 'empty'
    with Writer(empty, version=9) as writer:
        writer.add_connection('/people', 'offload_interfaces/msg/PersonArray', typestore=typestore)
    assert bag_evaluator.main([str(empty), '--out', str(out), '--no-plots']) == 0
    assert 'has no messages' in capsys.readouterr().err
    assert json.loads((out / 'metrics.json').read_text())['run']['messages'] == 0


def test_documented_record_command_lists_the_run_topics():
    block = re.search(r'ros2 bag record (.*?)\n\n', bag_recorder_node.__doc__, re.DOTALL)
    assert block is not None
    listed = [word for word in block.group(1).split() if word.startswith('/')]
    assert listed == [topic for topic, _ in RUN_TOPICS]
    table = re.findall(r'^``(/\S+)``\s+``(\S+)``', bag_recorder_node.__doc__, re.MULTILINE)
    assert tuple(table) == RUN_TOPICS
    assert [topic for topic, _ in bag_recorder_node.INPUT_TOPICS] == [
        '/image_raw', '/camera_info', '/imu'
    ]  # fmt: skip
