"""The fingerprint of what shapes an agent's answers: system prompt, model, tools, settings.

Two runs with the same fingerprint asked the same model the same way; a replay compares a
candidate's fingerprint with the recorded one to tell what changed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from streamagents.operators.agent.config import AgentConfig
from streamagents.serde.chat import ToolSpec

__all__ = ["config_fingerprint"]


def config_fingerprint(config: AgentConfig, tools: Sequence[ToolSpec]) -> str:
    """`cfg-` and the first 16 hex digits of the sha256 of the system prompt, the model chain
    (provider, model, generation settings), the tools the model is told about, the documents
    and the built-in tools, as canonical JSON."""
    shaping = {
        "system_prompt": config.system_prompt,
        "models": [
            {"provider": m.provider, "model": m.model, "generation": m.generation}
            for m in config.model.chain()
        ],
        "tools": [spec.model_dump(mode="json") for spec in tools],
        "documents": list(config.documents),
        "builtin_tools": config.builtin_tools.model_dump(mode="json"),
    }
    text = json.dumps(shaping, sort_keys=True, separators=(",", ":"), default=str)
    return "cfg-" + hashlib.sha256(text.encode()).hexdigest()[:16]
