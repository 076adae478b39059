"""Chat-model providers behind one interface."""

from streamagents.connectors.models.base import ChatModel

__all__ = ["ChatModel"]
