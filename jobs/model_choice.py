"""From the spec's chosen model entry to the `ModelSpec` the operator gets; serves the demo.

A `demo` entry is the scripted test double: a `LoopbackStubServer` on 127.0.0.1 running the
entry's responder, reached through the real Gemini adapter (provider `gemini`, a base URL
pointing at the stub and a placeholder key). It lives only while the job it serves runs,
in the process that started the job, so it reaches workers on this machine only.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

from streamagents.connectors.loopback_stub import CachedContentsDouble, LoopbackStubServer
from streamagents.jobs.spec import ModelEntry
from streamagents.operators.agent.config import ModelSpec

__all__ = ["DEMO_API_KEY", "demo_banner", "demo_server", "model_spec"]

DEMO_API_KEY = "demo-placeholder-not-a-key"
"""What the Gemini SDK is given as key for the demo stub (the SDK insists on one)."""


def demo_banner(entry: ModelEntry) -> str:
    """The loud notice printed when a job runs on the demo model."""
    rule = "=" * 78
    return (
        f"{rule}\n"
        "DEMO MODE: no usable API key (GEMINI_API_KEY / OPENAI_API_KEY) is set, so the agent\n"
        "talks to a SCRIPTED TEST DOUBLE on 127.0.0.1 that speaks the Gemini wire protocol:\n"
        f"  {entry.responder}\n"
        "Answers are canned, not written by an LLM; every answer says so.\n"
        "Set GEMINI_API_KEY or OPENAI_API_KEY to use a real model.\n"
        f"{rule}"
    )


@contextmanager
def demo_server(entry: ModelEntry) -> Iterator[str | None]:
    """Serve the demo responder while the block runs and yield its URL; None for real models."""
    if entry.provider != "demo" or entry.responder is None:
        yield None
        return
    module_name, _, attribute = entry.responder.partition(":")
    responder = getattr(importlib.import_module(module_name), attribute)
    # The demo speaks the Gemini wire, context caching included (`context_cache` in a spec).
    with LoopbackStubServer(CachedContentsDouble(responder, count_tokens=False)) as stub:
        yield stub.url


def model_spec(entry: ModelEntry, demo_url: str | None = None) -> ModelSpec:
    """The operator's `ModelSpec` for `entry`; a demo entry needs the running stub's URL."""
    settings = {**entry.model_dump(exclude={"responder"}), "provider": entry.wire}
    if entry.provider == "demo":
        if demo_url is None:
            raise ValueError("a demo model needs its stub server running (demo_url is missing)")
        settings["options"] = {"api_key": DEMO_API_KEY, "base_url": demo_url, **entry.options}
        settings["sdk_process"] = bool(entry.sdk_process)  # the demo starts in a blink unless asked
    return ModelSpec(**settings)
