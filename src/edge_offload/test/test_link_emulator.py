# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Link emulator over real sockets: rate, RTT, traces, run-time changes, CLI and failures.

Rates are measured at the receiver from its first to its last byte; the RTT is the median of
small ping-pongs. Acceptance: configured values are reproduced within 10 %.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import edge_offload
from edge_offload.link_emulator import LinkEmulator
from edge_offload.link_emulator_cli import main
from edge_offload.link_shaping import DirectionConfig, LinkEmulatorConfig
from edge_offload.link_traces import PACKET_BYTES, DeliveryTrace, rates_to_timestamps

_LOGGER = logging.getLogger(__name__)
TRACES = Path(__file__).parents[1] / 'traces'
TOLERANCE = 0.10
TIMEOUT_S = 20.0
BLOCK = bytes(65536)

pytestmark = pytest.mark.timeout(120)

Samples = list[tuple[float, int]]


def recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f'EOF after {len(data)} of {count} bytes')
        data += chunk
    return bytes(data)


def receive_samples(sock: socket.socket) -> Samples:
    """Read until EOF; return (arrival time, byte count) of every read."""
    samples = []
    while True:
        data = sock.recv(1 << 20)
        now = time.monotonic()
        if not data:
            return samples
        samples.append((now, len(data)))


def rate_bps(samples: Samples, start: float = -1.0, end: float = float('inf')) -> float:
    """Return bytes after the first sample in [start, end] over first-to-last time, in bit/s."""
    window = [sample for sample in samples if start <= sample[0] <= end]
    assert len(window) >= 10, f'too few samples: {len(window)}'
    elapsed = window[-1][0] - window[0][0]
    return sum(count for _, count in window[1:]) * 8 / elapsed


def send_bulk(sock: socket.socket, count: int) -> None:
    while count > 0:
        block = BLOCK[: min(count, len(BLOCK))]
        sock.sendall(block)
        count -= len(block)


def connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Upstream:
    """A server behind the emulator; a connection's first byte picks its role.

    ``E``: echo. ``S``: sink; the arrival samples go to ``sinks`` at EOF. ``P`` and an 8-byte
    count: send that many bytes, then end the stream.
    """

    def __init__(self, port: int = 0) -> None:
        self.listener = socket.create_server(('127.0.0.1', port))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.sinks: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._serve, daemon=True)]
        self._threads[0].start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(TIMEOUT_S)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                mode = conn.recv(1)
                if mode == b'E':
                    while data := conn.recv(65536):
                        conn.sendall(data)
                elif mode == b'S':
                    self.sinks.put(receive_samples(conn))
                elif mode == b'P':
                    (count,) = struct.unpack('!Q', recv_exactly(conn, 8))
                    send_bulk(conn, count)
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass
            except OSError as exc:
                self.sinks.put(exc)

    def sink_result(self) -> Samples:
        result = self.sinks.get(timeout=TIMEOUT_S)
        if isinstance(result, Exception):
            raise result
        return result

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for thread in self._threads:
            thread.join(TIMEOUT_S)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def emulator_for(upstream: Upstream, **link: object) -> Iterator[LinkEmulator]:
    config = LinkEmulatorConfig.from_rtt('127.0.0.1', upstream.port, **link)
    with LinkEmulator(config) as emulator:
        yield emulator


def upload(address: tuple[str, int], count: int) -> socket.socket:
    """Send ``count`` bytes to the sink through the emulator; return the open socket."""
    sock = connect(address)
    sock.sendall(b'S')
    send_bulk(sock, count)
    sock.shutdown(socket.SHUT_WR)
    return sock


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'condition not met in time'
        time.sleep(0.01)


class Background:
    """Run a function in a thread; ``result`` re-raises its exception."""

    def __init__(self, function: Callable[..., object], *args: object) -> None:
        self._result: list = []
        self._thread = threading.Thread(target=self._run, args=(function, args), daemon=True)
        self._thread.start()

    def _run(self, function: Callable[..., object], args: tuple) -> None:
        try:
            self._result.append((True, function(*args)))
        except BaseException as exc:  # handed to the test thread
            self._result.append((False, exc))

    def result(self) -> object:
        self._thread.join(TIMEOUT_S)
        assert self._result, 'background call did not finish'
        ok, value = self._result[0]
        if not ok:
            raise value
        return value


# -- acceptance: configured rate and RTT -----------------------------------------------------

RATE_BPS = 50e6
RTT_S = 0.010


def test_uplink_rate_is_reproduced(upstream):
    with emulator_for(upstream, rtt_s=RTT_S, uplink_bps=RATE_BPS, downlink_bps=RATE_BPS) as emu:
        count = int(RATE_BPS / 8 * 2.0)
        with upload(emu.address, count) as sock:
            samples = upstream.sink_result()
            assert sock.recv(1) == b''  # the sink's end of stream comes back
        assert sum(n for _, n in samples) == count
        measured = rate_bps(samples)
        _LOGGER.info('uplink %.2f Mbit/s (configured %g)', measured / 1e6, RATE_BPS / 1e6)
        assert measured == pytest.approx(RATE_BPS, rel=TOLERANCE)
        assert emu.stats().uplink_bytes == count + 1


def test_downlink_rate_is_reproduced(upstream):
    with emulator_for(upstream, rtt_s=RTT_S, uplink_bps=RATE_BPS, downlink_bps=RATE_BPS) as emu:
        count = int(RATE_BPS / 8 * 2.0)
        with connect(emu.address) as sock:
            sock.sendall(b'P' + struct.pack('!Q', count))
            samples = receive_samples(sock)
        assert sum(n for _, n in samples) == count
        measured = rate_bps(samples)
        _LOGGER.info('downlink %.2f Mbit/s (configured %g)', measured / 1e6, RATE_BPS / 1e6)
        assert measured == pytest.approx(RATE_BPS, rel=TOLERANCE)
        wait_until(lambda: emu.stats().downlink_bytes == count)


def ping_rtts(sock: socket.socket, count: int, size: int = 64) -> list[float]:
    payload = bytes(range(size))
    rtts = []
    for _ in range(count):
        start = time.monotonic()
        sock.sendall(payload)
        assert recv_exactly(sock, size) == payload
        rtts.append(time.monotonic() - start)
    return rtts


def test_rtt_is_reproduced(upstream):
    with emulator_for(upstream, rtt_s=RTT_S, uplink_bps=RATE_BPS, downlink_bps=RATE_BPS) as emu:
        with connect(emu.address) as sock:
            sock.sendall(b'E')
            ping_rtts(sock, 3)  # warm-up
            rtts = ping_rtts(sock, 50)
    median = statistics.median(rtts)
    _LOGGER.info('RTT median %.3f ms, min %.3f ms (configured 10)', median * 1e3, min(rtts) * 1e3)
    assert median == pytest.approx(RTT_S, rel=TOLERANCE)
    assert min(rtts) >= RTT_S * (1 - TOLERANCE)


def test_jitter_spreads_rtts_but_never_reorders_bytes(upstream):
    payload = os.urandom(2_000_000)
    with emulator_for(
        upstream, rtt_s=0.004, jitter_s=0.001, uplink_bps=100e6, downlink_bps=100e6, seed=7
    ) as emu:
        with connect(emu.address) as sock:
            sock.sendall(b'E')
            rtts = ping_rtts(sock, 30)
            sender = Background(lambda: (sock.sendall(payload), sock.shutdown(socket.SHUT_WR)))
            echoed = b''.join(
                iter(lambda: sock.recv(1 << 20), b'')
            )  # until the echo server ends the stream
            sender.result()
        assert echoed == payload
        stats = emu.stats()
        assert stats.uplink_bytes == len(payload) + 1 + 30 * 64
        assert stats.downlink_bytes == len(payload) + 30 * 64
    assert statistics.pstdev(rtts) > 0.0002
    assert statistics.median(rtts) == pytest.approx(0.004, abs=0.0015)


# -- acceptance: traces ----------------------------------------------------------------------


def trace_slice(trace: DeliveryTrace, start_s: float, end_s: float) -> DeliveryTrace:
    start_ms, end_ms = round(start_s * 1000), round(end_s * 1000)
    return DeliveryTrace.from_timestamps_ms(
        [t - start_ms for t in trace.timestamps_ms if start_ms < t <= end_ms]
    )


def check_trace_rate(
    samples: Samples, trace: DeliveryTrace, origin: float, delay_s: float, label: str
) -> None:
    measured = rate_bps(samples)
    first, last = samples[0][0] - origin - delay_s, samples[-1][0] - origin - delay_s
    expected = trace.mean_rate_between(first, last)
    _LOGGER.info(
        '%s: %.2f Mbit/s, trace %.2f Mbit/s over [%.3f, %.3f] s',
        label, measured / 1e6, expected / 1e6, first, last,
    )  # fmt: skip
    assert measured == pytest.approx(expected, rel=TOLERANCE)


def test_shipped_outdoor_trace_rate_is_reproduced(upstream):
    outdoor = DeliveryTrace.load(TRACES / 'outdoor_73mbps.trace')
    # Three seconds of the shipped trace around its first dip to near zero (4.3 s to 4.6 s).
    trace = trace_slice(outdoor, 3.0, 6.0)
    assert trace.mean_rate_between(1.3, 1.6) < 3e6
    with emulator_for(upstream, rtt_s=0.002, uplink_trace=trace) as emu:
        count = trace.opportunities_between(0.0, 3.0) * PACKET_BYTES
        with upload(emu.address, count):
            samples = upstream.sink_result()
        check_trace_rate(samples, trace, emu.schedule_start('uplink'), 0.001, 'outdoor trace')


def test_step_trace_rate_is_reproduced_on_the_downlink(upstream):
    # 30 Mbit/s for 0.5 s, then 90 Mbit/s for 0.5 s, repeating.
    trace = DeliveryTrace.from_timestamps_ms(rates_to_timestamps([30e6] * 5 + [90e6] * 5, 0.1))
    with emulator_for(upstream, rtt_s=0.004, downlink_trace=trace) as emu:
        count = int(trace.mean_rate_bps() / 8 * 2.2)
        with connect(emu.address) as sock:
            sock.sendall(b'P' + struct.pack('!Q', count))
            samples = receive_samples(sock)
        assert sum(n for _, n in samples) == count
        origin = emu.schedule_start('downlink')
        check_trace_rate(samples, trace, origin, 0.002, 'step trace')
        # Each half of a period on its own: the link follows the step.
        for begin, end, rate in ((0.05, 0.45, 30e6), (0.55, 0.95, 90e6)):
            part = rate_bps(samples, origin + 0.002 + begin, origin + 0.002 + end)
            _LOGGER.info(
                '  [%g, %g] s: %.2f Mbit/s (trace %g)', begin, end, part / 1e6, rate / 1e6
            )
            assert part == pytest.approx(rate, rel=TOLERANCE)


# -- acceptance: run-time change -------------------------------------------------------------


def test_set_uplink_step_change_takes_effect(upstream):
    before_bps, after_bps = 20e6, 60e6
    with emulator_for(upstream, rtt_s=RTT_S, uplink_bps=before_bps) as emu:
        count = int(before_bps / 8 * 1.0 + after_bps / 8 * 1.5)
        sender = Background(lambda: upload(emu.address, count).close())
        start = time.monotonic()
        time.sleep(1.0)  # the experiment's first phase, not a readiness wait
        change_begin = time.monotonic()
        emu.set_uplink(rate_bps=after_bps)
        change_end = time.monotonic()
        samples = upstream.sink_result()
        sender.result()
    assert sum(n for _, n in samples) == count
    before = rate_bps(samples, start, change_begin)
    after = rate_bps(samples, change_end + 0.05)
    _LOGGER.info('step change: %.2f -> %.2f Mbit/s', before / 1e6, after / 1e6)
    assert before == pytest.approx(before_bps, rel=TOLERANCE)
    assert after == pytest.approx(after_bps, rel=TOLERANCE)


def test_set_delay_changes_the_rtt_of_an_open_connection(upstream):
    with emulator_for(upstream, rtt_s=0.002, uplink_bps=RATE_BPS, downlink_bps=RATE_BPS) as emu:
        with connect(emu.address) as sock:
            sock.sendall(b'E')
            before = statistics.median(ping_rtts(sock, 10))
            emu.set_delay(0.020)
            after = statistics.median(ping_rtts(sock, 15))
    _LOGGER.info('set_delay: RTT %.3f -> %.3f ms', before * 1e3, after * 1e3)
    # The emulated delay is a floor; scheduling on a loaded machine only adds to it (one
    # CI run measured 3.97 ms for the 2 ms link), so the small RTT is bounded loosely.
    assert 0.002 * (1 - TOLERANCE) <= before < 0.010
    assert after == pytest.approx(0.020, rel=TOLERANCE)


def test_connections_share_one_bottleneck(upstream):
    rate = 40e6
    with emulator_for(upstream, rtt_s=0.002, uplink_bps=rate) as emu:
        count = 3_000_000
        senders = [Background(lambda: upload(emu.address, count).close()) for _ in range(2)]
        results = [upstream.sink_result() for _ in senders]
        for sender in senders:
            sender.result()
        assert emu.stats().connections_accepted == 2
    assert all(sum(n for _, n in samples) == count for samples in results)
    merged = sorted(results[0] + results[1])
    measured = rate_bps(merged)
    _LOGGER.info('two connections: %.2f Mbit/s (link %g)', measured / 1e6, rate / 1e6)
    assert measured == pytest.approx(rate, rel=TOLERANCE)


# -- failures and lifecycle ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def assert_closed_by_peer(sock: socket.socket) -> None:
    try:
        assert sock.recv(1) == b''
    except ConnectionResetError:
        pass


def test_refused_upstream_closes_the_client_and_serving_goes_on():
    port = free_port()
    config = LinkEmulatorConfig.from_rtt('127.0.0.1', port, rtt_s=0.002, uplink_bps=10e6)
    with LinkEmulator(config) as emu:
        with connect(emu.address) as sock:
            assert_closed_by_peer(sock)
        wait_until(lambda: emu.stats().connections_failed == 1)
        server = Upstream(port)
        try:
            with connect(emu.address) as sock:
                sock.sendall(b'E')
                assert ping_rtts(sock, 3)
            stats = emu.stats()
            assert (stats.connections_accepted, stats.connections_failed) == (2, 1)
        finally:
            server.close()


def test_peer_reset_closes_only_that_connection(upstream):
    with emulator_for(upstream, rtt_s=0.002, uplink_bps=5e6) as emu:
        victim = connect(emu.address)
        victim.sendall(b'S' + bytes(200_000))
        wait_until(lambda: emu.stats().uplink_queued_bytes > 0)
        victim.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        victim.close()  # RST
        wait_until(lambda: emu.stats().connections_active == 0)
        assert emu.stats().uplink_queued_bytes == 0
        with connect(emu.address) as sock:
            sock.sendall(b'E')
            assert ping_rtts(sock, 3)


def test_stop_is_idempotent_and_closes_connections(upstream):
    emu = LinkEmulator(LinkEmulatorConfig('127.0.0.1', 0, '127.0.0.1', upstream.port))
    emu.start()
    with pytest.raises(RuntimeError):
        emu.start()
    sock = connect(emu.address)
    sock.sendall(b'E')
    assert ping_rtts(sock, 1)
    emu.stop()
    emu.stop()
    assert_closed_by_peer(sock)
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        connect(emu.address)


def test_config_is_validated():
    with pytest.raises(ValueError, match='not both'):
        DirectionConfig(rate_bps=1e6, trace=DeliveryTrace.from_timestamps_ms([1]))
    with pytest.raises(ValueError, match='rate'):
        DirectionConfig(rate_bps=-1.0)
    with pytest.raises(ValueError, match='delay'):
        DirectionConfig(delay_s=-0.1)
    with pytest.raises(ValueError, match='queue_bytes'):
        DirectionConfig(queue_bytes=0)
    with pytest.raises(ValueError, match='upstream_port'):
        LinkEmulatorConfig('127.0.0.1', 0, '127.0.0.1', 0)
    config = LinkEmulatorConfig.from_rtt('h', 1, rtt_s=0.02, jitter_s=0.001, uplink_bps=5e6)
    assert (config.uplink.delay_s, config.downlink.delay_s) == (0.01, 0.01)
    assert (config.uplink.rate_bps, config.downlink.rate_bps) == (5e6, None)


# -- command line ----------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(edge_offload.__file__).resolve().parents[1])
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [package_root, env.get('PYTHONPATH')]))
    env['PYTHONUNBUFFERED'] = '1'
    return env


def test_cli_relays_and_exits_cleanly_on_sigint(upstream):
    process = subprocess.Popen(
        [
            sys.executable, '-m', 'edge_offload.link_emulator_cli',
            '--listen', '127.0.0.1:0', '--upstream', f'127.0.0.1:{upstream.port}',
            '--rtt-ms', '4', '--jitter-ms', '0.5', '--uplink-mbps', '50', '--downlink-mbps', '50',
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True,
    )  # fmt: skip
    try:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
        banner = lines.get(timeout=TIMEOUT_S)
        assert banner.startswith('link_emulator listening on 127.0.0.1:'), banner
        port = int(banner.strip().rsplit(':', 1)[1])
        with connect(('127.0.0.1', port)) as sock:
            sock.sendall(b'E')
            rtts = ping_rtts(sock, 10)
        assert statistics.median(rtts) == pytest.approx(0.004, rel=0.5)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=TIMEOUT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(TIMEOUT_S)
        process.stdout.close()
        process.stderr.close()


def test_cli_bad_argument_exits_with_status_2():
    result = subprocess.run(
        [sys.executable, '-m', 'edge_offload.link_emulator_cli', '--upstream', 'no-port-here'],
        capture_output=True, text=True, env=child_env(), timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 2
    assert 'expected HOST:PORT' in result.stderr


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        ([], 'the following arguments are required: --upstream'),
        (['--upstream', '127.0.0.1:x'], 'bad port'),
        (['--upstream', '127.0.0.1:70000'], 'out of range'),
        (['--upstream', '127.0.0.1:0'], 'must not be 0'),
        (['--upstream', '127.0.0.1:1', '--uplink-mbps', '-5'], 'must be > 0'),
        (['--upstream', '127.0.0.1:1', '--rtt-ms', '-1'], 'must be >= 0'),
        (['--upstream', '127.0.0.1:1', '--downlink-trace', '/no/such.trace'], 'not found'),
        (['--upstream', '127.0.0.1:1', '--uplink-trace', __file__], 'bad trace file'),
        (
            ['--upstream', '127.0.0.1:1', '--uplink-mbps', '5', '--uplink-trace', '/x.trace'],
            'not found',
        ),
        (['--upstream', '127.0.0.1:1', '--uplink-mbps', 'fast'], 'not a number'),
        (
            [
                '--upstream',
                'h:1',
                '--uplink-mbps',
                '5',
                '--uplink-trace',
                str(TRACES / 'indoor_93mbps.trace'),
            ],
            'not allowed with argument',
        ),
    ],
)
def test_cli_refuses_bad_values(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
