"""A Flink session cluster on 127.0.0.1, started from the scripts that ship in the PyFlink wheel.

`StandaloneCluster` writes a private configuration directory (free ports, loopback
addresses, its own log and pid directories), starts one JobManager and N TaskManagers
with `pyflink/bin/jobmanager.sh` and `taskmanager.sh`, and waits until the REST API
reports every TaskManager. `stop()` stops exactly the processes it started — it reads
their ids from its own pid directory, so other clusters on the machine are not touched —
by sending them all SIGTERM at once (the scripts' `stop-all` sends the same, but to one
daemon after the other and after a JVM of their own), and kills any that outlive the
polite stop. Use it as a context manager and the cluster is gone when the block ends,
whether or not the block failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from streamagents.jobs.cluster.local_jvm import interpreter_first
from streamagents.operators.flink.settings import BUFFER_DEBLOAT

__all__ = [
    "FAILURE_DETECTION",
    "FAST_RESTART",
    "SLOTS_PER_TASKMANAGER",
    "ClusterError",
    "StandaloneCluster",
    "flink_home",
    "free_port",
    "interpreter_first",
    "rest_call",
    "script_environment",
]


FAILURE_DETECTION: dict[str, int] = {
    "heartbeat.interval": 250,
    "heartbeat.rpc-failure-threshold": 2,
    "heartbeat.timeout": 15_000,
}
"""How fast a lost TaskManager is noticed (docs/reliability.md#a-lost-taskmanager): a
process that is gone fails two heartbeat calls in a row, about 0.5 s (until then a restart
sends tasks to it again, and they fail); one that hangs (a long GC pause, a machine that
stops answering) is given 15 s. Flink's defaults (10 s, 2, 50 s) suit large clusters: about
20 s after a `kill -9` before the job can restart."""

FAST_RESTART: dict[str, str] = {
    "restart-strategy.type": "exponential-delay",
    "restart-strategy.exponential-delay.initial-backoff": "100 ms",
    "taskmanager.load-balance.mode": "SLOTS",
}
"""How a job restarts once a loss is noticed (docs/reliability.md#a-lost-taskmanager): after
0.1 s, growing 1.5 times per failure in a row up to a minute (Flink's default starts at 1 s),
with the job's tasks spread over the TaskManagers so that each keeps a free slot
(`SLOTS_PER_TASKMANAGER`): a restart then lands on a TaskManager whose Python interpreter has
already imported the job's modules, not on a new one that imports them first."""

SLOTS_PER_TASKMANAGER = 2
"""Task slots per TaskManager by default: a job of parallelism 2 on 2 TaskManagers uses one
slot of each, and after one is lost both subtasks restart at once on the other."""


class ClusterError(RuntimeError):
    """The cluster could not be started or reached; the message says which log to read."""


def flink_home() -> Path:
    """The Flink distribution inside the installed PyFlink wheel (bin/, conf/, lib/)."""
    import pyflink

    return Path(pyflink.__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rest_call(address: str, path: str, body: Any = None, timeout_s: float = 5.0) -> Any:
    """Call a Flink REST API path (e.g. `/overview`) on `host:port`: GET, or POST with a JSON
    body; returns the parsed JSON reply."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{address}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:
        return json.loads(reply.read())


def script_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for Flink's scripts: this interpreter's bin first on PATH (PyFlink workers
    find pemja and this package through it)."""
    env = dict(os.environ)
    env["PATH"] = interpreter_first(env.get("PATH"))
    env.update(extra or {})
    return env


def _set_dotted(config: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `a.b.c` in a nested mapping, as Flink's config.yaml nests its keys."""
    *parents, leaf = dotted.split(".")
    node = config
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[leaf] = value


class StandaloneCluster:
    """One JobManager and `taskmanagers` TaskManagers on loopback, in a private directory."""

    def __init__(
        self,
        workdir: str | Path,
        *,
        taskmanagers: int = 2,
        slots_per_taskmanager: int = SLOTS_PER_TASKMANAGER,
        conf: dict[str, Any] | None = None,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.taskmanagers = taskmanagers
        self.slots_per_taskmanager = slots_per_taskmanager
        self.rest_port = free_port()
        self.rpc_port = free_port()
        self._extra_conf = conf or {}
        self.conf_dir = self.workdir / "conf"
        self.log_dir = self.workdir / "log"
        self.pid_dir = self.workdir / "pid"
        self.lib_dir = self.workdir / "lib"

    @property
    def rest_address(self) -> str:
        """`localhost:PORT` of the REST API, as `streamagents submit --jobmanager` takes it."""
        return f"localhost:{self.rest_port}"

    def environment(self) -> dict[str, str]:
        """Environment that points Flink's scripts and CLI at this cluster's private dirs."""
        return script_environment(
            {
                "FLINK_CONF_DIR": str(self.conf_dir),
                "FLINK_LOG_DIR": str(self.log_dir),
                "FLINK_PID_DIR": str(self.pid_dir),
                "FLINK_LIB_DIR": str(self.lib_dir),
            }
        )

    def write_configuration(self) -> None:
        """Copy the wheel's conf/ and set loopback addresses, free ports and slots; link its
        lib/ jars plus opt/flink-python into a private lib/."""
        for directory in (self.conf_dir, self.log_dir, self.pid_dir, self.lib_dir):
            directory.mkdir(parents=True, exist_ok=True)
        # flink-python (with pemja) on the daemons' own classpath, loaded parent-first: else
        # each job loads it in its own class loader, and on Java 17 pemja fails from the
        # second job on a TaskManager ("NoSuchFieldException: loadedLibraryNames").
        jars = [
            *(flink_home() / "lib").glob("*.jar"),
            *(flink_home() / "opt").glob("flink-python*.jar"),
        ]
        for jar in jars:
            link = self.lib_dir / jar.name
            if not link.exists():
                link.symlink_to(jar)
        source = flink_home() / "conf"
        for item in source.iterdir():
            if item.is_file() and item.name != "config.yaml":
                (self.conf_dir / item.name).write_bytes(item.read_bytes())
        config = yaml.safe_load((source / "config.yaml").read_text()) or {}
        settings: dict[str, Any] = {
            "jobmanager.rpc.address": "localhost",
            "jobmanager.rpc.port": self.rpc_port,
            "jobmanager.bind-host": "localhost",
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.host": "localhost",
            "taskmanager.bind-host": "localhost",
            "taskmanager.numberOfTaskSlots": self.slots_per_taskmanager,
            "taskmanager.memory.process.size": "1536m",
            "rest.address": "localhost",
            "rest.bind-address": "localhost",
            "rest.port": self.rest_port,
            "classloader.parent-first-patterns.additional": ["pemja."],
            BUFFER_DEBLOAT: True,  # about a second of input in network buffers
            # The REST API's metric fetcher starts no new fetch while one is out, and its
            # query to a TaskManager that died waits this long (Flink's default: 10 min,
            # metrics frozen meanwhile, `submit --wait` blind).
            "web.timeout": 60_000,
            **FAILURE_DETECTION,
            **FAST_RESTART,
            **self._extra_conf,
        }
        for key, value in settings.items():
            _set_dotted(config, key, value)
        (self.conf_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    def start(self, timeout_s: float = 120.0) -> StandaloneCluster:
        """Start the daemons and wait until every TaskManager has registered, all within
        `timeout_s` (on a loaded machine one script's start can take a minute: each runs a
        JVM to work out the memory settings before the daemon's)."""
        self.write_configuration()
        deadline = time.monotonic() + timeout_s
        try:
            self._script("jobmanager.sh", "start", timeout_s=timeout_s)
            for _ in range(self.taskmanagers):
                self._script("taskmanager.sh", "start", timeout_s=deadline - time.monotonic())
            self._wait_ready(deadline, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _script(self, name: str, *args: str, timeout_s: float = 60.0) -> None:
        """Run one of Flink's scripts (`jobmanager.sh start`, ...) for this cluster."""
        subprocess.run(
            ["bash", str(flink_home() / "bin" / name), *args],
            env=self.environment(),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=max(timeout_s, 1.0),
        )

    def _wait_ready(self, deadline: float, timeout_s: float) -> None:
        """Wait until every TaskManager has registered, until `deadline` (monotonic) of a
        start given `timeout_s`."""
        seen = 0
        while time.monotonic() < deadline:
            try:
                seen = int(rest_call(self.rest_address, "/overview").get("taskmanagers", 0))
            except (urllib.error.URLError, OSError, ValueError):
                seen = 0
            if seen >= self.taskmanagers:
                return
            if not self.pids():
                break
            time.sleep(0.5)
        raise ClusterError(
            f"Flink cluster not ready after {timeout_s:.0f}s ({seen} of {self.taskmanagers} "
            f"TaskManagers registered); logs in {self.log_dir}"
        )

    def taskmanager_pids(self) -> list[int]:
        """Ids of this cluster's TaskManager processes that are still alive, oldest first."""
        alive = []
        for pid_file in sorted(self.pid_dir.glob("*taskexecutor*.pid")):
            for line in pid_file.read_text().split():
                if line.isdigit() and _alive(int(line)):
                    alive.append(int(line))
        return alive

    def add_taskmanager(self) -> None:
        """Start one more TaskManager with this cluster's configuration (e.g. to replace a
        lost one); it registers with the JobManager on its own."""
        self._script("taskmanager.sh", "start")

    def pids(self) -> list[int]:
        """Ids of this cluster's daemon processes that are still alive."""
        alive = []
        for pid_file in self.pid_dir.glob("*.pid"):
            for line in pid_file.read_text().split():
                if line.isdigit() and _alive(int(line)):
                    alive.append(int(line))
        return alive

    def stop(self, grace_s: float = 15.0) -> None:
        """Stop this cluster's processes: SIGTERM to all at once, SIGKILL to those still
        alive after `grace_s`; once they are gone (reaped, not even zombies), forget their
        pid files. Never raises."""
        daemons = self.pids()
        for pid in daemons:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        _wait_until(lambda: not self.pids(), grace_s)
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        # The daemons' parent is init (their script exited), which reaps them in its time.
        _wait_until(lambda: not any(_exists(pid) for pid in daemons), grace_s)
        if not self.pids():
            for pid_file in self.pid_dir.glob("*.pid"):
                with contextlib.suppress(OSError):
                    pid_file.unlink()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_until(condition: Callable[[], bool], timeout_s: float) -> None:
    """Poll `condition` every 0.1 s until it holds or `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def _exists(pid: int) -> bool:
    """Whether a process `pid` exists, a zombie included."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def _alive(pid: int) -> bool:
    if not _exists(pid):
        return False
    # A zombie is dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state != "Z"
