"""Cluster support without a cluster: the PATH Flink's processes and workers see, the
configuration a cluster is started with, and how its processes are stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import reduce
from pathlib import Path
from typing import Any

import yaml

from streamagents.jobs.cluster.standalone import (
    FAILURE_DETECTION,
    FAST_RESTART,
    SLOTS_PER_TASKMANAGER,
    StandaloneCluster,
    interpreter_first,
    script_environment,
)
from streamagents.operators.flink.settings import BUFFER_DEBLOAT

BIN = str(Path(sys.executable).parent)
COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"


def test_the_interpreter_s_directory_comes_first_on_path_once() -> None:
    path = os.pathsep.join(["/usr/bin", BIN, "/bin"])
    assert interpreter_first(path).split(os.pathsep) == [BIN, "/usr/bin", "/bin"]
    assert interpreter_first(None) == BIN


def test_flink_scripts_get_the_interpreter_first_on_path() -> None:
    assert script_environment({"X": "1"})["PATH"].split(os.pathsep)[0] == BIN


def written_setting(cluster: StandaloneCluster, dotted: str) -> Any:
    """A setting of the config.yaml the cluster wrote (Flink nests dotted keys)."""
    config = yaml.safe_load((cluster.conf_dir / "config.yaml").read_text())
    return reduce(lambda node, part: node[part], dotted.split("."), config)


def test_a_cluster_debloats_its_network_buffers_unless_told_otherwise(tmp_path: Path) -> None:
    default = StandaloneCluster(tmp_path / "default")
    default.write_configuration()
    assert written_setting(default, BUFFER_DEBLOAT) is True
    aligned = StandaloneCluster(tmp_path / "off", conf={BUFFER_DEBLOAT: False})
    aligned.write_configuration()
    assert written_setting(aligned, BUFFER_DEBLOAT) is False


def test_clusters_the_product_starts_notice_a_lost_taskmanager_within_seconds(
    tmp_path: Path,
) -> None:
    """`cluster start` and the docker compose cluster write the same failure-detection
    settings: a `kill -9` noticed within about a second (Flink's defaults take ~20 s, 50 s
    for a hung process)."""
    cluster = StandaloneCluster(tmp_path / "cluster")
    cluster.write_configuration()
    for key, value in FAILURE_DETECTION.items():
        assert written_setting(cluster, key) == value, key
    compose = yaml.safe_load(COMPOSE.read_text())
    properties = yaml.safe_load(compose["x-flink"]["environment"]["FLINK_PROPERTIES"])
    assert {key: properties[key] for key in FAILURE_DETECTION} == FAILURE_DETECTION
    noticed_s = FAILURE_DETECTION["heartbeat.interval"] / 1000
    assert noticed_s * FAILURE_DETECTION["heartbeat.rpc-failure-threshold"] <= 1


def test_clusters_the_product_starts_restart_a_job_at_once_on_a_free_slot(
    tmp_path: Path,
) -> None:
    """`cluster start` and the docker compose cluster restart a job 0.1 s after a failure
    (Flink's default: 1 s) and keep a free slot on each TaskManager for it: a job's slots are
    spread, 2 per TaskManager, so a job of parallelism 2 on 2 TaskManagers uses one of each."""
    cluster = StandaloneCluster(tmp_path / "cluster")
    cluster.write_configuration()
    for key, value in FAST_RESTART.items():
        assert written_setting(cluster, key) == value, key
    assert written_setting(cluster, "taskmanager.numberOfTaskSlots") == SLOTS_PER_TASKMANAGER == 2
    assert FAST_RESTART["taskmanager.load-balance.mode"] == "SLOTS"
    compose = yaml.safe_load(COMPOSE.read_text())
    properties = yaml.safe_load(compose["x-flink"]["environment"]["FLINK_PROPERTIES"])
    assert {key: properties[key] for key in FAST_RESTART} == FAST_RESTART
    assert properties["taskmanager.numberOfTaskSlots"] == SLOTS_PER_TASKMANAGER


def test_stop_terms_every_daemon_of_its_pid_files_kills_the_stubborn_and_forgets_them(
    tmp_path: Path,
) -> None:
    cluster = StandaloneCluster(tmp_path)
    cluster.pid_dir.mkdir(parents=True)
    polite = subprocess.Popen(["sleep", "60"])
    ignores_term = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    stubborn = subprocess.Popen(
        [sys.executable, "-c", ignores_term + "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
    (cluster.pid_dir / "flink-taskexecutor.pid").write_text(f"{polite.pid}\n{stubborn.pid}\n")
    try:
        cluster.stop(grace_s=1)
        assert polite.wait(timeout=5) == -signal.SIGTERM
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
    finally:
        polite.kill()
        stubborn.kill()
    assert cluster.pids() == [] and list(cluster.pid_dir.iterdir()) == []
