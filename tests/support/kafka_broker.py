"""A real single-node Kafka broker (KRaft: broker and controller in one JVM) on 127.0.0.1.

`KafkaBroker` formats its own log directory, starts `kafka.Kafka` from the jars that
`maven_artifacts.resolve("kafka-broker")` put in the cache, on free loopback ports, and
waits until the broker answers a metadata request. `stop()` ends exactly the process it
started (SIGTERM, then SIGKILL). Use it as a context manager.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from typing_extensions import Self

from streamagents.jobs.cluster.standalone import free_port

__all__ = ["KafkaBroker", "cluster_id"]

_CLIENT_LOG = logging.getLogger("kafka-test-client")
"""librdkafka logs here instead of stderr (it reports every refused connect while waiting)."""

# Short timeouts so a single-node broker is ready and transactions settle quickly in tests;
# replication factors of 1 because there is one broker.
_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.flush.interval.messages": "10000",
    # Input records up to 25 MiB (the tests write bad lines of 20 MB); producers still refuse
    # records over their own max.request.size (1 MiB by default), as a job's sinks do.
    "message.max.bytes": str(25 * 1024 * 1024),
}

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %-5p [%c] %m%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = warn
logger.apache.name = org.apache.kafka
logger.apache.level = warn
"""


def cluster_id(raw: bytes) -> str:
    """A KRaft cluster id from 16 random bytes that `kafka-storage format -t` takes as a value.

    Kafka ids are URL-safe base64 without padding, whose first character comes from the
    first byte's top 6 bits: with the top bit clear it is one of `A`-`Z`, `a`-`f`, never
    `-` (which the tool reads as an option) or `_`."""
    if len(raw) != 16:
        raise ValueError(f"a cluster id is 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(bytes([raw[0] & 0x7F]) + raw[1:]).rstrip(b"=").decode()


class KafkaBroker:
    """One KRaft broker on loopback, with its data, configuration and log under `workdir`."""

    def __init__(self, workdir: str | Path, jars_dir: str | Path) -> None:
        self.workdir = Path(workdir).resolve()
        self.jars_dir = Path(jars_dir)
        self.port = free_port()
        self.controller_port = free_port()
        self.log_file = self.workdir / "broker.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """`127.0.0.1:PORT`, as Kafka clients and the job spec take it."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """Id of the broker process while it runs."""
        return None if self._process is None else self._process.pid

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java",
            "-Xms128m",
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            f"{self.jars_dir}/*",
            main,
            *args,
        ]

    def _configure(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        settings = {
            **_SETTINGS,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.workdir / "data"),
        }
        properties = self.workdir / "server.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        return properties

    def start(self, timeout_s: float = 90.0) -> Self:
        """Format the log directory, start the broker and wait until it answers."""
        properties = self._configure()
        formatted = subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id(uuid.uuid4().bytes),
                "-c",
                str(properties),
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {formatted.stdout}{formatted.stderr}")
        with (self.workdir / "stdout.log").open("wb") as out:
            self._process = subprocess.Popen(
                self._java("kafka.Kafka", str(properties)), stdout=out, stderr=subprocess.STDOUT
            )
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        admin = self.admin()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                break
            with contextlib.suppress(Exception):
                if admin.list_topics(timeout=2).brokers:
                    return
            time.sleep(0.3)
        raise RuntimeError(
            f"Kafka broker not answering after {timeout_s:.0f}s; see {self.log_file} and "
            f"{self.workdir / 'stdout.log'}"
        )

    def admin(self) -> AdminClient:
        """An admin client of this broker."""
        return AdminClient({"bootstrap.servers": self.bootstrap_servers, "logger": _CLIENT_LOG})

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic and wait until it exists."""
        admin = self.admin()  # kept referenced: the futures fail once the client is gone
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)]
        )
        futures[name].result(timeout=30)

    def stop(self, grace_s: float = 20.0) -> None:
        """End the process this object started: SIGTERM, then SIGKILL; never raises."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
