# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Server half of ``lopinfer`` and ``layer_split``: the same graph, the server's slices.

``begin`` captures the same graph as the robot (cached), checks its hash, and runs the
server's slices in a thread; ``push`` feeds its mailbox; ``pull`` is answered (deferred, no
worker blocked) as soon as slices for the robot are ready.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import json
import math
import threading
import time
from typing import Any

import torch

from edge_offload import protocol
from edge_offload.modes.base import (
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
)
from lopinfer_ros.graph import CaptureError, OpGraph, capture
from lopinfer_ros.locality import NodeInfo, analyse
from lopinfer_ros.problem import Plan
from lopinfer_ros.runtime import (
    Mailbox,
    Sender,
    SideRunner,
    Slice,
    expected_receives,
)
from lopinfer_ros.schedule import SERVER, Schedule, make_schedule
from lopinfer_ros.wire import (
    DTYPES,
    MAX_PLANS_PER_SESSION,
    MAX_REPLY_BYTES,
    MAX_REQUESTS_PER_SESSION,
    MAX_SLICES_PER_MESSAGE,
    plan_hash,
)


class _ServerRequest:
    """The server's side of one robot request."""

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        self.mailbox: Mailbox | None = None
        self.early: list[Slice] = []  # pushes that overtook their begin
        self.outbox: collections.deque[Slice] = collections.deque()
        self.pull: concurrent.futures.Future | None = None
        self.finished = False
        self.error = ''
        self.lock = threading.Lock()
        self.compute_s = 0.0
        self.cancel = threading.Event()


class _LopSession:
    """Per-robot server state: graphs by model and shape, plans by hash, live requests."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.plans: collections.OrderedDict[str, Plan] = collections.OrderedDict()
        self.requests: collections.OrderedDict[int, _ServerRequest] = collections.OrderedDict()


class LopInferServer(ServerMode):
    """Server half of ``lopinfer`` (and ``layer_split``: same runtime, other plans)."""

    def __init__(self, context: ServerModeContext) -> None:
        super().__init__(context)
        self._graphs: dict[tuple, tuple[OpGraph, list[NodeInfo]]] = {}
        self._graph_lock = threading.Lock()

    def open_session(self, session_id: str) -> _LopSession:
        """Return a fresh session state."""
        return _LopSession()

    def close_session(self, state: _LopSession) -> None:
        """Abort the session's requests."""
        with state.lock:
            requests = list(state.requests.values())
            state.requests.clear()
        for request in requests:
            self._abort(request, 'session closed')

    def handle(self, state: _LopSession, call: ServerCall) -> Any:
        """Answer begin, push, pull and abort."""
        request_id = call.fields.get('request')
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'request must be an integer')
        if call.op == 'begin':
            return self._begin(state, request_id, call)
        request = self._request(state, request_id, create=call.op in ('push', 'pull'))
        if call.op == 'push':
            return self._push(request, call)
        if call.op == 'pull':
            return self._pull(request)
        if call.op == 'abort':
            self._abort(request, 'aborted by the robot')
            return ServerReply()
        raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'unknown lopinfer op {call.op!r}')

    # -- requests --------------------------------------------------------------------

    def _request(self, state: _LopSession, request_id: int, create: bool) -> _ServerRequest:
        with state.lock:
            request = state.requests.get(request_id)
            if request is None:
                if not create and not state.requests:
                    raise protocol.ProtocolError(
                        protocol.E_BAD_REQUEST, f'no lopinfer request {request_id}'
                    )
                if state.requests and request_id < min(state.requests):
                    raise protocol.ProtocolError(
                        protocol.E_BAD_REQUEST, f'request {request_id} is stale'
                    )
                request = _ServerRequest(request_id)
                state.requests[request_id] = request
                while len(state.requests) > MAX_REQUESTS_PER_SESSION:
                    _, old = state.requests.popitem(last=False)
                    self._abort(old, 'superseded by a newer request')
            return request

    def _graph(self, model: str, network: str, shapes: list) -> tuple[OpGraph, list[NodeInfo]]:
        key = (model, network, json.dumps(shapes))
        with self._graph_lock:
            cached = self._graphs.get(key)
            if cached is not None:
                return cached
            loaded = self.context.models.get(model)
            module = loaded.module
            if network != model:
                attribute = network.removeprefix(model + '.')
                module = getattr(module, attribute, None)
                if not isinstance(module, torch.nn.Module):
                    raise protocol.ProtocolError(
                        protocol.E_BAD_REQUEST, f'{model} has no submodule {attribute!r}'
                    )
            inputs = []
            for shape, dtype in shapes:
                if dtype not in DTYPES or len(shape) > protocol.MAX_TENSOR_NDIM:
                    raise protocol.ProtocolError(protocol.E_INVALID_INPUT, f'bad input {dtype}')
                if math.prod(shape) > 64 * 1024 * 1024:
                    raise protocol.ProtocolError(protocol.E_TOO_LARGE, 'input too large')
                inputs.append(torch.zeros(shape, dtype=DTYPES[dtype]))
            try:
                graph = capture(module, inputs)
            except CaptureError as error:
                raise protocol.ProtocolError(protocol.E_INVALID_INPUT, str(error)) from error
            cached = (graph, analyse(graph))
            self._graphs[key] = cached
            return cached

    def _begin(self, state: _LopSession, request_id: int, call: ServerCall) -> ServerReply:
        fields = call.fields
        try:
            model = str(fields['model'])
            network = str(fields.get('network', model))
            shapes = [
                [[int(s) for s in shape], str(dtype)]
                for shape, dtype in zip(
                    fields['input_shapes'], fields['input_dtypes'], strict=True
                )
            ]
            digest = str(fields['plan_hash'])
            timeout_s = min(float(fields.get('timeout_s', 30.0)), 300.0)
        except (KeyError, TypeError, ValueError) as error:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'bad begin: {error}') from error
        graph, infos = self._graph(model, network, shapes)
        if fields.get('graph_hash') != graph.hash:
            raise protocol.ProtocolError(
                protocol.E_BAD_REQUEST,
                f'graph hash mismatch: robot {fields.get("graph_hash")}, server {graph.hash} '
                '(different model code or input shape)',
            )
        plan = self._plan(state, digest, call.tensors.get('plan'))
        try:
            schedule = make_schedule(graph, infos, plan)
        except ValueError as error:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'bad plan: {error}') from error
        request = self._request(state, request_id, create=True)
        with request.lock:
            if request.mailbox is not None:
                raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'request already begun')
            request.mailbox = Mailbox(expected_receives(schedule, SERVER))
            early, request.early = request.early, []
        for item in early:
            request.mailbox.put(item)
        thread = threading.Thread(
            target=self._run,
            args=(request, graph, infos, schedule, time.monotonic() + timeout_s),
            name=f'lopinfer-{request_id}',
            daemon=True,
        )
        thread.start()
        return ServerReply(fields={'ok': True}, model=model)

    def _plan(self, state: _LopSession, digest: str, body: Any) -> Plan:
        with state.lock:
            plan = state.plans.get(digest)
            if plan is not None:
                state.plans.move_to_end(digest)
                return plan
        if not isinstance(body, torch.Tensor):
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'unknown plan {digest}')
        if body.dim() != 2 or body.shape[0] != 2 or body.dtype != torch.int32:
            raise protocol.ProtocolError(
                protocol.E_BAD_REQUEST, 'a plan is an int32 (2, n) tensor'
            )
        plan = Plan(tuple(body[0].tolist()), tuple(body[1].tolist()))
        if plan_hash(plan) != digest:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'plan does not match its hash')
        with state.lock:
            state.plans[digest] = plan
            while len(state.plans) > MAX_PLANS_PER_SESSION:
                state.plans.popitem(last=False)
        return plan

    def _run(self, request, graph, infos, schedule: Schedule, deadline: float) -> None:
        sender = Sender(lambda batch: self._queue_for_robot(request, batch), len(graph.nodes) + 1)
        runner = SideRunner(
            graph,
            infos,
            schedule,
            SERVER,
            mailbox=request.mailbox,
            sender=sender,
            deadline=deadline,
            cancel=request.cancel,
        )
        try:
            runner.run()
            sender.close()
        except Exception as error:  # noqa: BLE001 - reported to the robot's pull
            request.error = f'{type(error).__name__}: {error}'
            sender.close(0.1)
        request.compute_s = runner.stats.compute_s
        with request.lock:
            request.finished = True
        self._answer_pull(request)

    def _queue_for_robot(self, request: _ServerRequest, batch: list[Slice]) -> None:
        with request.lock:
            request.outbox.extend(batch)
        self._answer_pull(request)

    def _answer_pull(self, request: _ServerRequest) -> None:
        with request.lock:
            future = request.pull
            if future is None:
                return
            if request.error:
                request.pull = None
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_exception(
                        protocol.ProtocolError(protocol.E_INTERNAL, f'lopinfer: {request.error}')
                    )
                return
            if not request.outbox and not request.finished:
                return
            request.pull = None
            slices, size = [], 0
            while request.outbox and len(slices) < MAX_SLICES_PER_MESSAGE:
                item = request.outbox[0]
                nbytes = protocol.tensor_nbytes(item.tensor)
                if slices and size + nbytes > MAX_REPLY_BYTES:
                    break
                slices.append(request.outbox.popleft())
                size += nbytes
        reply = ServerReply(
            fields={'slices': [[s.node, s.lo, s.hi] for s in slices], 'done': request.finished},
            tensors={f's{i}': s.tensor for i, s in enumerate(slices)},
            compute_time_s=request.compute_s,
        )
        # The server cancels a pending pull when the session closes.
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            future.set_result(reply)

    def _push(self, request: _ServerRequest, call: ServerCall) -> ServerReply:
        entries = call.fields.get('slices')
        if not isinstance(entries, list) or len(entries) > MAX_SLICES_PER_MESSAGE:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'push needs a list of slices')
        items = []
        for i, entry in enumerate(entries):
            tensor = call.tensors.get(f's{i}')
            if tensor is None or not isinstance(entry, list) or len(entry) != 3:
                raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'bad slice entry {i}')
            items.append(Slice(int(entry[0]), int(entry[1]), int(entry[2]), tensor))
        with request.lock:
            mailbox = request.mailbox
            if mailbox is None:
                if len(request.early) + len(items) > 4096:
                    raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'too many early slices')
                request.early.extend(items)
                return ServerReply()
        for item in items:
            mailbox.put(item)
        return ServerReply()

    def _pull(self, request: _ServerRequest) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with request.lock:
            if request.pull is not None:
                raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'a pull is already waiting')
            request.pull = future
        self._answer_pull(request)
        return future

    def _abort(self, request: _ServerRequest, why: str) -> None:
        request.cancel.set()
        with request.lock:
            request.error = request.error or why
            mailbox = request.mailbox
        if mailbox is not None:
            mailbox.fail(why)
        self._answer_pull(request)
