"""`SdkProcessModel`: a chat model whose SDK requests run in a worker process of its own.

In a TaskManager every Python function shares one interpreter and one GIL, and an
official SDK's request path (building, sending and parsing over its HTTP client) is most
of a turn's Python time. Wrapped in this model, the adapter (the same `ChatModel`, pickled)
runs in `sdk_worker`, a child process with its own interpreter; the caller's side of a call
is one frame out (the messages' JSON, each dumped once, see `MessageJson`) and one frame
back (the `ChatResponse` JSON); the worker parses each distinct message once too. Errors
come back as the same classes with the same facts (`_worker_frames`), so runs, retries and
dead letters read as they do in-process.

The worker starts at `prepare()` or the first call, and is attached to the event loop of
the first call. `prepare()` waits until the worker has loaded the model the first time this
process loads that kind of model (so a model that cannot load fails an operator's `open`);
after that (a job restarted on a TaskManager that ran it) it returns at once, and until
that worker has loaded the model (one to a few seconds) calls are made in this process, so
a restarted task runs, checkpoints and answers while it starts (unless the model has
configured rate limits, which one process's admission must keep: then they wait for it).
When a worker dies, the calls it had are sent once more to a new worker (never made in
this process: a request that ended a worker must not end the TaskManager), and wait for
it; a call whose second worker died too fails with `ConnectionFailed`. The worker exits
when this model is closed or its process dies.

`wants_worker` settles `sdk_process` left unset: a worker where it has a core of its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from streamagents.connectors.providers._usable_cores import usable_cores
from streamagents.connectors.providers._worker_frames import (
    CANCEL,
    ERROR,
    HEADER_SIZE,
    READY,
    REQUEST,
    RESPONSE,
    SETUP,
    blobs,
    error_from_json,
    frame,
    parse_header,
    read_frame,
)
from streamagents.connectors.providers.admission import RateLimits
from streamagents.connectors.providers.base import ChatModel
from streamagents.connectors.providers.errors import ConnectionFailed
from streamagents.serde.chat import ChatResponse, ToolSpec
from streamagents.serde.message_json import MessageJson
from streamagents.serde.messages import ChatMessage

__all__ = ["SdkProcessModel", "WorkerExited", "wants_worker"]

_LOG = logging.getLogger(__name__)
_CLOSE_WAIT_S = 5.0
_READY_WAIT_S = 120.0

_loaded: set[tuple[str, str]] = set()
"""The (interpreter, model class) pairs a worker of this process has loaded: what can fail
to load in a worker (an import, the SDK) is known to work for them."""


def wants_worker(sdk_process: bool | None, cores: int | None = None) -> bool:
    """Whether a model's SDK runs in a worker process: as `sdk_process` says, or when it is
    None (unset), where this process may use two cores or more (`cores`, default: counted),
    so that the worker's interpreter does not take the caller's core."""
    if sdk_process is not None:
        return sdk_process
    return (usable_cores() if cores is None else cores) >= 2


def _limits_configured(model: ChatModel) -> bool:
    """Whether `model` has configured rate limits (`RateLimits.configured`), which one
    process's admission must keep: its calls are then never made beside its worker's."""
    limits = getattr(model, "limits", None)
    return isinstance(limits, RateLimits) and limits.configured


class WorkerExited(Exception):
    """The worker process ended while a call was in it."""


class _Worker:
    """One worker process and the calls waiting for its answers; its pipes are attached to
    an event loop at the first call (`attach`)."""

    def __init__(self, python: str, setup: bytes) -> None:
        self.process = subprocess.Popen(
            [python, "-m", "streamagents.connectors.providers.sdk_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # unbuffered: `wait_ready` reads no further than the ready frame
        )
        assert self.process.stdin is not None
        self.process.stdin.write(frame(SETUP, 0, setup))
        self.ready = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pending: dict[int, asyncio.Future[tuple[bytes, bytes]]] = {}
        self.exited: str | None = None
        self.attaching: asyncio.Future[None] | None = None
        self._next_id = 0

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until the worker has loaded its model (reading its ready frame before the
        pipes are attached to a loop) and say whether it did; raise what it failed with, or
        say it exited. After `timeout_s` it goes on (False): the first calls then wait for
        the worker."""
        if self.ready or self.loop is not None:
            return self.ready
        first = self._first_frame(time.monotonic() + timeout_s)
        if first is None:
            _LOG.warning("the SDK worker is not ready after %.0f s; going on", timeout_s)
            return False
        if first[0] == ERROR:
            raise error_from_json(first[1])
        self.ready = True
        return True

    def _first_frame(self, deadline: float) -> tuple[bytes, bytes] | None:
        """The worker's first frame (kind, payload), read before it is attached to a loop;
        None at the deadline."""
        header = self._read_exactly(HEADER_SIZE, deadline)
        if header is None:
            return None
        length, kind, _ = parse_header(header)
        payload = self._read_exactly(length, deadline)
        return None if payload is None else (kind, payload)

    def _read_exactly(self, size: int, deadline: float) -> bytes | None:
        """`size` bytes of the worker's stdout, read before it is attached to a loop; None
        at the deadline."""
        stdout = self.process.stdout
        assert stdout is not None
        data = b""
        while len(data) < size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stdout], [], [], left)[0]:
                return None
            chunk = stdout.read(size - len(data))
            if not chunk:
                code = self.process.wait()
                raise WorkerExited(f"the SDK worker process exited with code {code} at start")
            data += chunk
        return data

    async def attach(self) -> None:
        """Read and write the worker's pipes on the running loop."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
        self._read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), self.process.stdout
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, self.process.stdin
        )
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self._reader = asyncio.create_task(self._read(reader))
        self.loop = loop

    def send(self, kind: bytes, call_id: int, payload: bytes = b"") -> None:
        self._writer.write(frame(kind, call_id, payload))

    async def call(self, body: bytes) -> tuple[bytes, bytes]:
        """Send a request and wait for its (kind, payload) answer."""
        if self.exited is not None:
            raise WorkerExited(self.exited)
        assert self.loop is not None
        self._next_id += 1
        call_id = self._next_id
        answer = self.loop.create_future()
        self.pending[call_id] = answer
        try:
            self.send(REQUEST, call_id, body)
            return await answer
        except asyncio.CancelledError:
            if self.pending.pop(call_id, None) is not None and self.exited is None:
                self.send(CANCEL, call_id)
            raise
        finally:
            self.pending.pop(call_id, None)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, call_id, payload = await read_frame(reader)
                if kind == READY:  # not read by `wait_ready`: the model loaded since
                    self.ready = True
                    continue
                answer = self.pending.pop(call_id, None)
                if answer is not None and not answer.done():
                    answer.set_result((kind, payload))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        code = await asyncio.to_thread(self.process.wait)
        self.exited = f"the SDK worker process exited with code {code}"
        for answer in self.pending.values():
            if not answer.done():
                answer.set_exception(WorkerExited(self.exited))
        self.pending.clear()

    async def close(self) -> None:
        """End the worker: its stdin closes, it finishes, else it is killed; then its output
        pipe is closed through its transport (a process the worker started may still hold
        it open), which ends the reader."""
        self._writer.close()
        try:
            await asyncio.to_thread(self.process.wait, _CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait)
        self._read_transport.close()
        await asyncio.gather(self._reader, return_exceptions=True)  # cancelled by a loop's stop

    def kill(self) -> None:
        """Kill the process and wait for it (a worker never attached, or of a loop gone)."""
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class SdkProcessModel(ChatModel):
    """Runs `model`'s calls in an SDK worker process (see the module docstring).

    `message_json` remembers each message's JSON text (share the runtime's, so a message is
    dumped once for memory accounting and requests); `python` is the worker's interpreter
    (default: this one's)."""

    def __init__(
        self,
        model: ChatModel,
        message_json: MessageJson | None = None,
        python: str | None = None,
    ) -> None:
        self.model = model
        self.provider = model.provider
        self._setup = pickle.dumps(model)
        self._json = message_json or MessageJson()
        self._python = python or sys.executable
        self._worker: _Worker | None = None
        self._tools: tuple[Sequence[ToolSpec], bytes] | None = None
        self._loading: _Worker | None = None
        self._called_here = False

    def __repr__(self) -> str:
        return f"SdkProcessModel({self.model!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the model only; a worker belongs to the process that started it."""
        return {"model": self.model, "_json": MessageJson(), "_python": self._python}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model"], state["_json"], state["_python"])  # type: ignore[misc]

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        **options: Any,
    ) -> ChatResponse:
        """Send the call to the worker (a new one if it died with the call) and return its
        answer, or raise the error it raised; make it in this process while a worker that
        `prepare` did not wait for is still loading the model."""
        body = b""
        for attempt in (1, 2):
            worker = await self._running()
            if self._loading_here(worker):
                self._called_here = True
                return await self.model.achat(messages, tools, **options)
            body = body or self._body(messages, tools, options)
            try:
                kind, payload = await worker.call(body)
            except WorkerExited as exited:
                _LOG.warning("%s; a new one takes the call", exited)
                if attempt == 2:
                    raise ConnectionFailed(str(exited), provider=self.provider) from None
                continue
            if kind == RESPONSE:
                return ChatResponse.model_validate_json(payload)
            raise error_from_json(payload)
        raise AssertionError("unreachable")

    def _body(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: dict[str, Any]
    ) -> bytes:
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, json.dumps([t.model_dump(mode="json") for t in tools]).encode())
        items = [self._tools[1], json.dumps(options).encode()]
        for message in messages:
            if not isinstance(message, ChatMessage):
                message = ChatMessage.model_validate(message)
            items.append(self._json.data(message))
        return blobs(items)

    def prepare(self) -> None:
        """Start the worker now. The first time this process loads this kind of model, wait
        until the worker has (it imports the SDKs: one to a few seconds), so that loading's
        error (a module missing, say) is raised here; later (an operator restarted in this
        process) return at once: calls are made in this process until the worker is ready."""
        if self._worker is None or self._worker.exited is not None:
            self._worker = _Worker(self._python, self._setup)
        kind = (self._python, f"{type(self.model).__module__}.{type(self.model).__qualname__}")
        if kind in _loaded:
            if not _limits_configured(self.model):  # else the worker alone keeps them
                self._loading = self._worker
        elif self._worker.wait_ready(_READY_WAIT_S):
            _loaded.add(kind)

    async def warm(self) -> None:
        """While calls are to be made in this process (a worker that `prepare` did not wait
        for is loading), build the in-process model's client on this loop now."""
        if self._worker is not None and self._loading_here(self._worker):
            await self.model.warm()

    def _loading_here(self, worker: _Worker) -> bool:
        """Whether calls are made in this process rather than by `worker`: it is the worker
        `prepare` did not wait for, and it has not loaded the model yet."""
        return worker is self._loading and not worker.ready

    async def _running(self) -> _Worker:
        """The worker, started if there is none or it exited, attached to this loop."""
        worker = self._worker
        if worker is not None and worker.loop not in (None, asyncio.get_running_loop()):
            worker.kill()  # attached to a loop that is gone (an earlier blocking `chat`)
            worker = None
        if worker is None or worker.exited is not None:
            worker = self._worker = _Worker(self._python, self._setup)
        if worker.attaching is None:
            worker.attaching = asyncio.ensure_future(worker.attach())
        await asyncio.shield(worker.attaching)
        return worker

    async def aclose(self) -> None:
        """Stop the worker (its calls still running are dropped), and the model's own client
        if calls were made in this process."""
        if self._called_here:
            await self.model.aclose()
        worker, self._worker = self._worker, None
        if worker is None:
            return
        if worker.loop is asyncio.get_running_loop():
            await worker.close()
        else:
            worker.kill()
