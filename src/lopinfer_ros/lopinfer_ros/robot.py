# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Robot half of ``lopinfer`` and ``layer_split``: plans, slices and the transfer threads.

The model's operator graph is captured once per input shape; its plan table (one plan per
1 MB/s bandwidth bucket) is loaded from ``plan_dir`` or built in the background on first
use (requests run locally meanwhile, and say so). Per request the bucket comes from the
link monitor (or a fixed bandwidth option), and the plan is named in the ``begin`` call by
its hash (with its body the first time in a session), so both sides run the same plan.
Then the robot runs its slices while a sender thread pushes the columns the server lacks
and one long-poll ``pull`` is always outstanding for the columns the server sends back.
Any failure raises ``OffloadError``: the offloader runs the request locally.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from edge_offload import protocol
from edge_offload.errors import OffloadError, ServerUnavailableError
from edge_offload.modes.base import (
    InferenceRequest,
    InferenceResult,
    InferenceStats,
    OffloadMode,
    Stage,
)
from lopinfer_ros.graph import CaptureError, OpGraph, capture
from lopinfer_ros.locality import NodeInfo, analyse
from lopinfer_ros.options import validate_options
from lopinfer_ros.plan_table import PlanTable, build_table
from lopinfer_ros.problem import LinkModel, Plan
from lopinfer_ros.profiler import build_problem, profile_graph
from lopinfer_ros.runtime import (
    LopAbortedError,
    Mailbox,
    Sender,
    SideRunner,
    Slice,
    expected_receives,
)
from lopinfer_ros.schedule import ROBOT, make_schedule
from lopinfer_ros.wire import (
    MAX_SLICES_PER_MESSAGE,
    dtype_name,
    plan_hash,
)


@dataclass
class Prepared:
    """A model's captured graph for one input shape and, once built, its plan table."""

    graph: OpGraph
    infos: list[NodeInfo]
    table: PlanTable | None = None
    planning: threading.Thread | None = None
    planning_error: str = ''
    planning_started: float = 0.0


class LopInferRobot(OffloadMode):
    """Robot half of ``lopinfer``: the bucket's LOP plan, slices streamed both ways.

    The registered modes (``lopinfer_ros.modes``) name it and its plan kind.
    """

    plan_kind: ClassVar[str] = 'lopinfer'

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.options = validate_options(
            self.name, getattr(context, 'options', {}).get(self.name, {})
        )
        # The context's logger: inside the bridge its records reach /rosout.
        self._logger = context.logger.getChild(self.name)
        self._lock = threading.Lock()
        self._prepared: dict[tuple, Prepared] = {}
        self._request_ids = 0
        self._plans_sent: set[str] = set()
        self._session_marker: Any = None

    # -- preparation -----------------------------------------------------------------

    def _network(self, model: Any) -> tuple[Any, bool]:
        """Return the module to split and whether it is a submodule of the model."""
        attribute = self.options['network_attribute']
        sub = getattr(model.module, attribute, None) if attribute else None
        return (sub, True) if isinstance(sub, torch.nn.Module) else (model.module, False)

    def table_path(self, model_name: str, graph: OpGraph) -> Path:
        """Return where the plan table of ``graph`` is kept."""
        directory = Path(str(self.options['plan_dir'])).expanduser()
        return directory / f'{model_name}_{graph.hash}.json'

    def _table(self, model_name: str, prepared: Prepared, inputs: list[torch.Tensor]) -> PlanTable:
        if prepared.table is not None:
            return prepared.table
        path = self.table_path(model_name, prepared.graph)
        if path.is_file():
            prepared.table = PlanTable.load(
                path, expect_model=model_name, expect_graph_hash=prepared.graph.hash
            )
            if abs(prepared.table.device_factor - float(self.options['device_factor'])) > 1e-9:
                self._logger.warning(
                    '%s: plan table %s was planned for device factor %s, the mode runs %s',
                    model_name,
                    path,
                    prepared.table.device_factor,
                    self.options['device_factor'],
                )
            return prepared.table
        if prepared.planning is None:
            prepared.planning_started = time.monotonic()
            prepared.planning = threading.Thread(
                target=self._plan_in_background,
                args=(model_name, prepared, [t.clone() for t in inputs], path),
                name='lopinfer-planner',
                daemon=True,
            )
            prepared.planning.start()
        if prepared.planning_error:
            raise OffloadError(
                f'{self.name}: planning {model_name} failed: {prepared.planning_error}'
            )
        raise OffloadError(
            f'{self.name}: plans for {model_name} are being built (started '
            f'{time.monotonic() - prepared.planning_started:.0f} s ago); running locally'
        )

    def _plan_in_background(
        self, model_name: str, prepared: Prepared, inputs: list[torch.Tensor], path: Path
    ) -> None:
        try:
            table = make_plan_table(
                model_name,
                prepared.graph,
                prepared.infos,
                inputs,
                device_factor=float(self.options['device_factor']),
                server_speedup=float(self.options['server_speedup']),
                workers=int(self.options['planner_workers']),
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            table.save(path)
            prepared.table = table
            self._logger.info('%s: plan table built and saved to %s', model_name, path)
        except Exception as error:  # noqa: BLE001 - reported on the next request
            self._logger.exception('%s: planning failed', model_name)
            prepared.planning_error = f'{type(error).__name__}: {error}'

    def _bandwidth(self) -> float:
        fixed = float(self.options['fixed_bandwidth_bytes_per_s'])
        if fixed > 0:
            return fixed
        link = self.context.link
        if link is not None:
            estimate = link.snapshot()
            if estimate.sample_count and math.isfinite(estimate.uplink_bandwidth_bps):
                return estimate.uplink_bandwidth_bps / 8.0
        return float(self.options['default_bandwidth_bytes_per_s'])

    # -- inference -------------------------------------------------------------------

    def infer(self, request: InferenceRequest) -> InferenceResult:
        """Run ``request`` with the current bucket's plan."""
        client = self.context.client
        if client is None:
            raise ServerUnavailableError('no edge server configured')
        model = self.context.models.get(request.model)
        with self._lock:
            started = time.monotonic()
            stats = InferenceStats()
            network, is_sub = self._network(model)
            if is_sub:
                outputs = self._run_with_split_submodule(model, network, request, stats)
            else:
                inputs = [request.inputs[name] for name in model.spec.inputs]
                model.validate(request.inputs)
                result = self._run_split(request.model, inputs, request, stats)
                if isinstance(result, torch.Tensor):
                    result = (result,)
                outputs = dict(zip(model.spec.outputs, result, strict=True))
            stats.total_time_s = time.monotonic() - started
            stats.local_compute_time_s = max(0.0, stats.total_time_s - stats.server_compute_time_s)
            request.report(Stage.DOWNLOADING, stats.bytes_up, stats.bytes_down)
            return InferenceResult(outputs=outputs, mode=self.name, stats=stats)

    def _run_with_split_submodule(self, model, network, request, stats) -> dict:
        original = network.forward

        def forward(*args: torch.Tensor) -> Any:
            return self._run_split(request.model, list(args), request, stats, network)

        network.forward = forward
        try:
            return model(request.inputs)
        finally:
            network.forward = original

    def _run_split(
        self,
        model_name: str,
        inputs: list[torch.Tensor],
        request: InferenceRequest,
        stats: InferenceStats,
        module: Any = None,
    ) -> Any:
        key_name = (
            model_name if module is None else f'{model_name}.{self.options["network_attribute"]}'
        )
        try:
            prepared = self._prepare_module(key_name, model_name, module, inputs)
        except CaptureError as error:
            raise OffloadError(f'{self.name}: {model_name} is not splittable: {error}') from error
        table = self._table(key_name, prepared, inputs)
        bucket = table.bucket_for(self._bandwidth())
        plan = table.plan(str(self.options['plan_kind'] or self.plan_kind), bucket)
        outputs = self.run_plan(key_name, model_name, prepared, plan, inputs, request, stats)
        return prepared.graph.unflatten(outputs)

    def _prepare_module(self, key_name, model_name, module, inputs) -> Prepared:
        """Capture (once per shape) the model, or its split submodule, as a graph."""
        key = (key_name, tuple((tuple(t.shape), t.dtype) for t in inputs))
        prepared = self._prepared.get(key)
        if prepared is None:
            if module is None:
                graph = capture(self.context.models.get(model_name).module, inputs)
            else:
                # While a request runs, its forward is ours: record the class's own.
                original = module.forward
                module.forward = type(module).forward.__get__(module)
                try:
                    graph = capture(module, inputs)
                finally:
                    module.forward = original
            prepared = Prepared(graph, analyse(graph))
            self._prepared[key] = prepared
        return prepared

    def run_plan(
        self,
        key_name: str,
        model_name: str,
        prepared: Prepared,
        plan: Plan,
        inputs: list[torch.Tensor],
        request: InferenceRequest,
        stats: InferenceStats,
    ) -> list[torch.Tensor]:
        """Run ``plan`` with the server; return the graph's outputs."""
        client = self.context.client
        schedule = make_schedule(prepared.graph, prepared.infos, plan)
        if not any(b > a for a, b in schedule.server):
            return self._run_alone(prepared, schedule, inputs, request, stats)
        self._request_ids += 1
        request_id = self._request_ids
        digest = plan_hash(plan)
        deadline = request.deadline if request.deadline is not None else time.monotonic() + 30.0
        timeout_s = max(0.05, deadline - time.monotonic())
        if client.server_info is not self._session_marker:
            self._plans_sent.clear()  # a new server session knows no plans
            self._session_marker = client.server_info
        fields = {
            'request': request_id,
            'model': model_name,
            'network': key_name,
            'graph_hash': prepared.graph.hash,
            'input_shapes': [list(t.shape) for t in inputs],
            'input_dtypes': [dtype_name(t.dtype) for t in inputs],
            'plan_hash': digest,
            'timeout_s': timeout_s,
        }
        begin_tensors = {}
        if digest not in self._plans_sent:
            # One (2, nodes) tensor: the header's lists are short by design.
            begin_tensors['plan'] = torch.tensor([plan.m, plan.r], dtype=torch.int32)
        mailbox = Mailbox(expected_receives(schedule, ROBOT))
        transfer = _RobotTransfer(self, request_id, mailbox, stats, timeout_s)
        begin = transfer.submit('begin', fields, begin_tensors)
        begin.add_done_callback(transfer.begun)
        self._plans_sent.add(digest)
        sender = Sender(transfer.push, max_queued=len(prepared.graph.nodes) + 1)
        if mailbox_expected := expected_receives(schedule, ROBOT):
            transfer.start_pulling(mailbox_expected)
        runner = SideRunner(
            prepared.graph,
            prepared.infos,
            schedule,
            ROBOT,
            mailbox=mailbox,
            sender=sender,
            slowdown=float(self.options['device_factor']),
            deadline=deadline,
            cancel=request.cancel,
        )
        request.report(Stage.SERVER_COMPUTE)
        try:
            outputs = runner.run(inputs)
            sender.close(timeout_s)
            if sender.error is not None:
                raise LopAbortedError(f'sending failed: {sender.error}')
            begin.result(timeout_s)
        except LopAbortedError as error:
            self._plans_sent.discard(digest)
            transfer.abort()
            raise OffloadError(f'{self.name}: {error}') from error
        except OffloadError:
            self._plans_sent.discard(digest)
            transfer.abort()
            raise
        finally:
            transfer.close()
        return outputs

    def _run_alone(self, prepared, schedule, inputs, request, stats) -> list[torch.Tensor]:
        # A device-only plan: nothing to exchange, no server round trip.
        runner = SideRunner(
            prepared.graph,
            prepared.infos,
            schedule,
            ROBOT,
            mailbox=Mailbox(0),
            sender=None,
            slowdown=float(self.options['device_factor']),
            deadline=request.deadline,
            cancel=request.cancel,
        )
        try:
            return runner.run(inputs)
        except LopAbortedError as error:
            raise OffloadError(f'{self.name}: {error}') from error

    def close(self) -> None:
        """Nothing to release: server state ends with each request."""


class _RobotTransfer:
    """The robot's calls of one request: begin, pushes (bounded), one pull at a time."""

    def __init__(self, mode: LopInferRobot, request_id: int, mailbox: Mailbox, stats, timeout_s):
        self.mode = mode
        self.client = mode.context.client
        self.request_id = request_id
        self.mailbox = mailbox
        self.stats = stats
        self.timeout_s = timeout_s
        self._push_slots = threading.Semaphore(int(mode.options['max_pushes_in_flight']))
        self._lock = threading.Lock()
        self._remaining = 0
        self._closed = False
        self.error: BaseException | None = None

    def submit(self, op: str, fields: dict, tensors: dict) -> Any:
        future = self.client.submit(self.mode.name, op, fields, tensors, timeout_s=self.timeout_s)
        future.add_done_callback(self._account)
        return future

    def begun(self, future: Any) -> None:
        """Wake the runner at once if the server refused the request."""
        try:
            future.result(0)
        except BaseException as error:  # noqa: BLE001 - reported by the runner
            self.error = error
            self.mailbox.fail(f'server refused the request: {error}')

    def _account(self, future: Any) -> None:
        try:
            reply = future.result(0)
        except BaseException:  # noqa: BLE001 - errors are handled by their waiter
            return
        with self._lock:
            self.stats.bytes_up += reply.bytes_up
            self.stats.bytes_down += reply.bytes_down
            self.stats.round_trips += 1
            self.stats.server_compute_time_s = max(
                self.stats.server_compute_time_s, reply.compute_time_s
            )

    def push(self, batch: list[Slice]) -> None:
        """Send ``batch`` in messages of at most MAX_SLICES_PER_MESSAGE slices."""
        for start in range(0, len(batch), MAX_SLICES_PER_MESSAGE):
            part = batch[start : start + MAX_SLICES_PER_MESSAGE]
            if not self._push_slots.acquire(timeout=self.timeout_s):
                raise LopAbortedError('server did not acknowledge pushed slices in time')
            if self.error is not None:
                raise LopAbortedError(f'push failed: {self.error}')
            fields = {'request': self.request_id, 'slices': [[s.node, s.lo, s.hi] for s in part]}
            tensors = {f's{i}': s.tensor for i, s in enumerate(part)}
            sent_at = time.monotonic()
            nbytes = sum(protocol.tensor_nbytes(s.tensor) for s in part)
            future = self.submit('push', fields, tensors)
            future.add_done_callback(lambda f, at=sent_at, n=nbytes: self._pushed(f, at, n))

    def _pushed(self, future: Any, sent_at: float, nbytes: int) -> None:
        self._push_slots.release()
        try:
            future.result(0)
        except BaseException as error:  # noqa: BLE001 - stops the sender
            self.error = error
            self.mailbox.fail(f'push failed: {error}')
            return
        link = self.mode.context.link
        if link is not None:
            link.record_transfer(nbytes, 0, time.monotonic() - sent_at)

    def start_pulling(self, expected: int) -> None:
        """Keep one pull outstanding until ``expected`` slices have come back."""
        self._remaining = expected
        self._pull()

    def _pull(self) -> None:
        with self._lock:
            if self._closed or self._remaining <= 0:
                return
        try:
            future = self.submit('pull', {'request': self.request_id}, {})
        except BaseException as error:  # noqa: BLE001 - wakes the runner
            self.mailbox.fail(f'pull failed: {error}')
            return
        future.add_done_callback(self._pulled)

    def _pulled(self, future: Any) -> None:
        try:
            reply = future.result(0)
            slices = reply.fields.get('slices', [])
            for i, entry in enumerate(slices):
                node, lo, hi = (int(v) for v in entry)
                self.mailbox.put(Slice(node, lo, hi, reply.tensors[f's{i}']))
        except BaseException as error:  # noqa: BLE001 - wakes the runner
            self.mailbox.fail(f'pull failed: {error}')
            return
        with self._lock:
            self._remaining -= len(slices)
        self._pull()

    def abort(self) -> None:
        """Tell the server to drop the request (best effort)."""
        try:
            self.client.submit(self.mode.name, 'abort', {'request': self.request_id}, {})
        except OffloadError:
            pass

    def close(self) -> None:
        """Stop pulling."""
        with self._lock:
            self._closed = True


# --------------------------------------------------------------------------------------
# planning (shared by the mode and the CLI)


def make_plan_table(
    model_name: str,
    graph: OpGraph,
    infos: list[NodeInfo],
    inputs: list[torch.Tensor],
    *,
    device_factor: float,
    server_speedup: float = 1.0,
    latency_s: float = 0.0013,
    workers: int = 2,
    progress: bool = False,
    profile: dict | None = None,
    **planner_options: Any,
) -> PlanTable:
    """Profile ``graph`` (unless given a profile) and plan every bucket."""
    if profile is None:
        profile = profile_graph(
            graph, infos, inputs, progress=progress, device_factor=device_factor
        )
    problem = build_problem(
        model_name,
        graph,
        infos,
        profile,
        device_factor=device_factor,
        server_speedup=server_speedup,
    )
    serialisation = profile['serialisation']
    link = LinkModel(
        bandwidth_bytes_per_s=1e6,
        latency_s=latency_s,
        per_message_s=float(serialisation['per_message_s']),
        per_byte_s=float(serialisation['per_byte_s']),
    )
    return build_table(
        problem,
        link,
        workers=workers,
        progress=progress,
        device_factor=device_factor,
        **planner_options,
    )
