"""The task thread's media store: calls from a thread Python did not start go to a worker."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from streamagents.connectors.media import MediaStore
from streamagents.operators.flink._task_thread_store import TaskThreadStore
from streamagents.serde.messages import ChatMessage, ImagePart

PNG = b"\x89PNG\r\n\x1a\n" + bytes(100)


class CountingWorker(ThreadPoolExecutor):
    """A one-thread pool that counts what it was handed."""

    def __init__(self) -> None:
        super().__init__(1)
        self.handed = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.handed += 1
        return super().submit(fn, *args, **kwargs)


def test_calls_from_the_main_thread_run_on_the_worker_and_from_python_threads_directly(
    tmp_path: Path,
) -> None:
    # pemja starts the interpreter on a JVM thread, which Python then sees as its main
    # thread (the pytest thread here); every other task thread is a dummy thread.
    worker = CountingWorker()
    store = TaskThreadStore(MediaStore(str(tmp_path)), worker)
    ref = store.put(PNG, "image/png")
    assert store.exists(ref) and store.get(ref) == PNG
    assert worker.handed == 3

    seen: list[bytes] = []
    thread = threading.Thread(target=lambda: seen.append(store.get(ref)))
    thread.start()
    thread.join()
    assert seen == [PNG] and worker.handed == 3  # an ordinary Python thread: no hand-over
    worker.shutdown()


def test_offload_hands_over_only_messages_with_media(tmp_path: Path) -> None:
    worker = CountingWorker()
    store = TaskThreadStore(MediaStore(str(tmp_path)), worker)
    text = ChatMessage.user("no media here")
    assert store.offload(text, 0) is text
    assert worker.handed == 0
    with_image = ChatMessage(role="user", parts=[ImagePart(mime_type="image/png", data=PNG)])
    moved = store.offload(with_image, 0)
    assert worker.handed == 1
    assert moved.media[0].ref is not None and store.get(moved.media[0].ref) == PNG
    worker.shutdown()
