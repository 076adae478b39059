"""The JVM a `run` starts early: its launch is under way while the command's modules are
imported, with this interpreter first on its PATH, its quick compiler only and no loopback
server for process-mode workers (checked in a new process, as the command line runs, so
this test process keeps its own environment and has no gateway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from streamagents.jobs.cluster.local_jvm import quick_compiler

BIN = str(Path(sys.executable).parent)

PROBE = """
import json, os, sys, threading
seen = {}

class WatchImports:
    def find_spec(self, name, path, target=None):
        if name == "streamagents.jobs.cli.run":
            launching = [t for t in threading.enumerate() if t.name == "gateway-launch"]
            seen["launching_as_the_commands_load"] = bool(launching)
        return None

sys.meta_path.insert(0, WatchImports())
from streamagents.jobs.cli.main import main
seen["exit_code"] = main(["run", "no-such-spec.yaml"])
for thread in threading.enumerate():
    if thread.name == "gateway-launch":
        thread.join(300)
import pyflink.java_gateway as gateway
seen["jvm_path_first"] = gateway._gateway.jvm.java.lang.System.getenv("PATH").split(os.pathsep)[0]
runtime = gateway._gateway.jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
seen["jvm_quick_compiler"] = "-XX:TieredStopAtLevel=1" in list(runtime.getInputArguments())
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.util.java_utils import get_j_env_configuration
env = StreamExecutionEnvironment.get_execution_environment()
config = get_j_env_configuration(env._j_stream_execution_environment)
seen["loopback_server"] = config.containsKey("python.loopback-server.address")
seen["beam_worker_imported"] = "apache_beam.runners.worker.sdk_worker" in sys.modules
print(json.dumps(seen))
"""


def test_run_launches_its_jvm_while_the_commands_load_with_this_python_first() -> None:
    env = dict(os.environ)
    env.pop("_python_worker_execution_mode", None)
    others = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry != BIN]
    env["PATH"] = os.pathsep.join(["/usr/bin", *others])  # java still found, BIN not first
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {
        "launching_as_the_commands_load": True,
        "exit_code": 2,  # the spec is missing: refused as before
        "jvm_path_first": BIN,  # the JVM's thread-mode workers find this interpreter
        "jvm_quick_compiler": True,  # C1 only: the optimising compiler's CPU is saved
        "loopback_server": False,  # thread-mode workers never call it: not started
        "beam_worker_imported": False,  # nor is Beam's worker imported for it
    }


def test_the_quick_compiler_is_added_to_jvm_args_unless_they_choose_the_compilers() -> None:
    assert quick_compiler(None) == "-XX:TieredStopAtLevel=1"
    assert quick_compiler("-Xmx2g") == "-Xmx2g -XX:TieredStopAtLevel=1"
    assert quick_compiler("-Xmx2g -XX:TieredStopAtLevel=4") == "-Xmx2g -XX:TieredStopAtLevel=4"
    assert quick_compiler("-XX:-TieredCompilation") == "-XX:-TieredCompilation"


WARM_PROBE = """
import json
from streamagents.jobs.cluster.local_jvm import start_in_background, warm_task_python
start_in_background().join(300)
warm_task_python(["wave", "no_such_module_anywhere", "colorsys"]).join(300)
from pyflink.java_gateway import get_gateway
core = get_gateway().jvm.pemja.core
settings = core.PythonInterpreterConfig
# A second interpreter, made as Flink's thread-mode operators make theirs.
task = core.PythonInterpreter(
    settings.newBuilder().setPythonExec("python").setExcType(settings.ExecType.MULTI_THREAD).build()
)
task.exec("import sys; found = sorted(n for n in NAMES if n in sys.modules)".replace(
    "NAMES", repr(["wave", "colorsys", "no_such_module_anywhere", OPERATIONS])
))
print(json.dumps(list(task.get("found"))))
task.close()
"""


def test_warming_imports_modules_where_the_tasks_will_find_them_past_one_that_fails() -> None:
    operations = "pyflink.fn_execution.embedded.operations"
    probe = f"OPERATIONS = {operations!r}\n{WARM_PROBE}"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    # PyFlink's thread-mode operations and the modules asked for are imported in the JVM's
    # Python, which every task's interpreter shares; a module that fails is skipped.
    assert found == sorted(["colorsys", "wave", operations])


CLASS_LOADER_PROBE = """
import json, time
from streamagents.jobs.cluster.local_jvm import start_in_background, warm_task_python
start_in_background().join(300)
from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import add_jars_to_context_class_loader
JAR = "file:/nowhere/streamagents-probe-connector.jar"
add_jars_to_context_class_loader([JAR])  # as the command does for the Kafka connector
thread = get_gateway().jvm.Thread

def sees_the_jar():
    try:  # a class loader that is not a URL class loader has no getURLs: not the jar's
        urls = thread.currentThread().getContextClassLoader().getURLs()
    except Exception:
        return False
    return JAR in [url.toString() for url in urls]

before = sees_the_jar()
warmer = warm_task_python([])
time.sleep(0.5)  # the warm-up's call (PyFlink's and Beam's imports) takes seconds
during = warmer.is_alive() and sees_the_jar()
warmer.join(300)
print(json.dumps([before, during, sees_the_jar()]))
"""


def test_warming_leaves_the_commands_jvm_thread_and_its_connector_jars_alone() -> None:
    """PyFlink puts a connector jar on the context class loader of the JVM thread that
    serves the command's calls; while the warm-up's long call runs, the command's calls
    are still served there (the Kafka connector is found)."""
    result = subprocess.run(
        [sys.executable, "-c", CLASS_LOADER_PROBE], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [True, True, True]
