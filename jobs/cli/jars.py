"""`streamagents jars fetch|path`: the Flink connector jars a job needs, in the user cache."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streamagents.connectors.connector_jars import (
    CONNECTORS,
    MAVEN_CENTRAL,
    JarFetchError,
    cached_jar,
    fetch_jar,
)

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add `jars fetch NAME` and `jars path NAME`."""
    names = sorted({name for jars in CONNECTORS.values() for name in jars})
    jars = subparsers.add_parser("jars", help="Fetch the Flink connector jars a job needs.")
    actions = jars.add_subparsers(dest="action", required=True, metavar="ACTION")
    fetch = actions.add_parser(
        "fetch",
        help="Download a connector jar for the installed Flink into the cache, verify its "
        "checksums and print its path.",
    )
    fetch.add_argument("name", choices=names, help="The connector.")
    fetch.add_argument(
        "--repository", default=MAVEN_CENTRAL, help="Maven repository URL (default: Central)."
    )
    fetch.set_defaults(handler=_fetch)
    path = actions.add_parser("path", help="Print the cached jar's path (exit 1 if not fetched).")
    path.add_argument("name", choices=names, help="The connector.")
    path.set_defaults(handler=_path)


def _fetch(args: argparse.Namespace) -> int:
    try:
        print(fetch_jar(args.name, repository=args.repository.rstrip("/")))
    except JarFetchError as exc:
        print(f"cannot fetch the {args.name} connector jar: {exc}", file=sys.stderr)
        return 1
    return 0


def _path(args: argparse.Namespace) -> int:
    try:
        jar = cached_jar(args.name)
    except JarFetchError as exc:
        print(exc, file=sys.stderr)
        return 1
    if jar is None:
        print(f"not fetched: run `streamagents jars fetch {args.name}`", file=sys.stderr)
        return 1
    print(jar)
    return 0
