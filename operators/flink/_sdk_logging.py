"""Keep the SDKs' per-request log calls off the hot path of a TaskManager's Python.

In thread mode PyFlink leaves the root logger at DEBUG with a handler that hands every
record to the JVM's logging, so each `logger.debug` of httpx, httpcore, openai or
google-genai — about a dozen per model call, one of them formatting the whole request —
is formatted and sent across. `quiet_sdk_loggers` raises those loggers to WARNING,
except any whose level was set explicitly (set one to DEBUG to see its records again).
"""

from __future__ import annotations

import logging

__all__ = ["SDK_LOGGERS", "quiet_sdk_loggers"]

SDK_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "openai",
    "google_genai",
    "aiohttp",
)
"""Loggers of the provider SDKs and their HTTP stacks."""


def quiet_sdk_loggers(level: int = logging.WARNING) -> None:
    """Set every SDK logger whose level is not set (NOTSET) to `level`."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(level)
