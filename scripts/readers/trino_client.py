#!/usr/bin/env python3
"""A small client of Trino's HTTP client protocol (standard library only).

POST /v1/statement with the SQL text, then GET each `nextUri` until there is
none, collecting `columns` and `data`; a query error (`error` in any answer)
raises TrinoError with Trino's message, error name and type. Used by the test
bed's readiness check (scripts/testbed.d/trino.sh) and by trino_reader.py.

Headers: X-Trino-User, X-Trino-Source, X-Trino-Time-Zone: UTC, and
X-Trino-Client-Capabilities: PARAMETRIC_DATETIME (without it Trino rounds
timestamps and times to milliseconds in its answers).

    trino_client.py [--server URL] [--user U] [--catalog C] [--schema S] SQL
prints the rows as one JSON array (stdout), exit 1 on a query error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Optional

DEFAULT_SERVER = "http://127.0.0.1:18080"


class TrinoError(Exception):
    """A query that Trino failed (an `error` in its answer)."""

    def __init__(self, message: str, name: str = "", kind: str = "", query_id: str = ""):
        super().__init__(message)
        self.message = message
        self.name = name
        self.kind = kind
        self.query_id = query_id

    def __str__(self) -> str:
        return f"{self.name or 'error'}: {self.message}"


class TrinoUnreachable(Exception):
    """The server does not answer (connection refused, timeout, HTTP 5xx for long)."""


def _request(url: str, data: Optional[bytes], headers: dict, timeout: float) -> dict:
    # 502/503/504 are retried (Trino answers 503 while it starts), as the protocol asks.
    delay = 0.1
    for attempt in range(50):
        req = urllib.request.Request(url, data=data, headers=headers,
                                     method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            if e.code in (502, 503, 504) and attempt < 49:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            body = e.read().decode("utf-8", "replace")[:500]
            raise TrinoUnreachable(f"HTTP {e.code} from {url}: {body}")
        except (urllib.error.URLError, OSError) as e:
            raise TrinoUnreachable(f"{url}: {getattr(e, 'reason', e)}")
    raise TrinoUnreachable(f"{url}: no answer")


def _message(err: dict) -> str:
    """Trino's error message, and its deepest cause's when that says more (a
    GENERIC_INTERNAL_ERROR's own message often names only the step that failed)."""
    msg = err.get("message") or "query failed"
    info = err.get("failureInfo") or {}
    root = None
    while info:
        if info.get("message"):
            root = f"{info.get('type', '').rsplit('.', 1)[-1]}: {info['message']}"
        info = info.get("cause") or {}
    if root and info is not None and err.get("errorName") == "GENERIC_INTERNAL_ERROR" \
            and root.split(": ", 1)[-1] not in msg:
        msg = f"{msg} (caused by {root})"
    return msg


def execute(sql: str, server: str = DEFAULT_SERVER, user: str = "topicberg",
            catalog: Optional[str] = None, schema: Optional[str] = None,
            timeout: float = 300.0) -> tuple[list[dict], list[list[Any]]]:
    """Run one statement; return (columns, rows) as Trino's JSON gives them.

    `columns` are Trino's column objects (name, type, typeSignature); the
    values in `rows` are Trino's JSON encoding of each type."""
    headers = {
        "X-Trino-User": user,
        "X-Trino-Source": "topicberg-readers",
        "X-Trino-Time-Zone": "UTC",
        "X-Trino-Client-Capabilities": "PARAMETRIC_DATETIME",
        "Content-Type": "text/plain; charset=utf-8",
    }
    if catalog:
        headers["X-Trino-Catalog"] = catalog
    if schema:
        headers["X-Trino-Schema"] = schema
    deadline = time.monotonic() + timeout
    answer = _request(server.rstrip("/") + "/v1/statement", sql.encode("utf-8"), headers, 60)
    columns: Optional[list[dict]] = None
    rows: list[list[Any]] = []
    while True:
        if answer.get("columns") and columns is None:
            columns = answer["columns"]
        if answer.get("data"):
            rows.extend(answer["data"])
        err = answer.get("error")
        if err:
            raise TrinoError(_message(err), err.get("errorName", ""),
                             err.get("errorType", ""), answer.get("id", ""))
        nxt = answer.get("nextUri")
        if not nxt:
            break
        if time.monotonic() > deadline:
            raise TrinoError(f"query did not finish within {timeout:.0f} s", "CLIENT_TIMEOUT",
                             "", answer.get("id", ""))
        answer = _request(nxt, None, headers, 60)
    return columns or [], rows


def main() -> None:
    p = argparse.ArgumentParser(description="Run one SQL statement on Trino, print the rows as JSON.")
    p.add_argument("--server", default=DEFAULT_SERVER)
    p.add_argument("--user", default="topicberg")
    p.add_argument("--catalog")
    p.add_argument("--schema")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("sql")
    a = p.parse_args()
    try:
        _cols, rows = execute(a.sql, a.server, a.user, a.catalog, a.schema, a.timeout)
    except (TrinoError, TrinoUnreachable) as e:
        sys.stderr.write(f"trino_client: {e}\n")
        sys.exit(1)
    sys.stdout.write(json.dumps(rows, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
