"""`proxied_session`: an aiohttp session that looks up the environment's proxy once.

An aiohttp session made with `trust_env=True` (as google-genai makes its own) looks up the
proxy for every request in a worker thread (`asyncio.to_thread`): a thread hop, a
future and the environment read per model call, about a tenth of the Python time of a
Gemini turn. A model's requests all go to one endpoint and the environment does not change
under a running job, so the session here asks once, with aiohttp's own lookup
(`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, credentials from `.netrc`), and sends every
request through what it found.
"""

from __future__ import annotations

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

__all__ = ["proxied_session"]


def proxied_session(endpoint: str, read_bufsize: int) -> aiohttp.ClientSession:
    """A session (no connection limit, as the SDKs make theirs) that reaches `endpoint`
    through the environment's proxy for it, if there is one; call on the running loop."""
    try:
        proxy, proxy_auth = get_env_proxy_for_url(URL(endpoint))
    except LookupError:
        proxy, proxy_auth = None, None
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        proxy=proxy,
        proxy_auth=proxy_auth,
        read_bufsize=read_bufsize,
    )
