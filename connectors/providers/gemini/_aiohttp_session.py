"""`proxied_session`: an aiohttp session that looks up the environment's proxy once; and
`shared_tls_context`, the TLS context its requests verify servers with, built once.

An aiohttp session made with `trust_env=True` (as google-genai makes its own) looks up the
proxy for every request in a worker thread (`asyncio.to_thread`): a thread hop, a
future and the environment read per model call, about a tenth of the Python time of a
Gemini turn. A model's requests all go to one endpoint and the environment does not change
under a running job, so the session here asks once, with aiohttp's own lookup
(`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, credentials from `.netrc`), and sends every
request through what it found.

google-genai builds two TLS contexts for aiohttp in each client it makes (one for requests,
one for websockets), each loading the whole CA bundle: about 50 ms of held GIL on a quiet
machine, several times that on a busy one, and a TaskManager restarting a job makes a
client per subtask at once. Given the context (`async_client_args["ssl"]`), it builds
neither; `shared_tls_context` is the one it would build, made once per process.
"""

from __future__ import annotations

import functools
import os
import ssl

import aiohttp
import certifi
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

__all__ = ["proxied_session", "shared_tls_context"]


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """The TLS context google-genai builds for aiohttp when given none (the CA bundle of
    `SSL_CERT_FILE`, else certifi's, and `SSL_CERT_DIR`), built on the first call."""
    return ssl.create_default_context(
        cafile=os.environ.get("SSL_CERT_FILE", certifi.where()),
        capath=os.environ.get("SSL_CERT_DIR"),
    )


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
