"""Rows of a PyArrow table for common.serialize_rows, for the readers whose engine
hands back Arrow data (polars, datafusion, daft, chdb).

The column types come from the table's Iceberg schema (pyiceberg_reader.ice_type,
metadata only). Engines differ in how they give some types back; this evens out
what does not change a value:
  - maps read as lists of {key, value} structs (Polars has no map type) or as
    lists of (key, value) pairs (PyArrow's MapArray) become [(k, v), ...];
  - nanosecond timestamps become int nanoseconds since the epoch;
  - a timestamptz column read without a time zone is an error (not guessed).
Anything else is left to common.canonical, which refuses a value of the wrong
Python type instead of printing it differently.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from common import EXIT_FAILURE, ReaderError


def _fix(v: Any, t: Any, opts: dict) -> Any:
    if v is None:
        return v
    if isinstance(t, str):
        if t == "string" and opts.get("binary_strings") and isinstance(v, bytes):
            return v.decode("utf-8")  # invalid UTF-8 raises: never printed altered
        if t == "timestamp" and opts.get("utc_timestamps") and isinstance(v, _dt.datetime) \
                and v.tzinfo is not None:
            if v.utcoffset() != _dt.timedelta(0):
                raise ReaderError(f"timestamp {v} is not in UTC", EXIT_FAILURE)
            return v.replace(tzinfo=None)
        return v
    kind = t[0]
    if kind == "struct":
        if isinstance(v, dict):
            return {n: _fix(v.get(n), ft, opts) for n, ft in t[1]}
        return v
    if kind == "list":
        return [_fix(x, t[1], opts) for x in v]
    if kind == "map":
        pairs = v.items() if isinstance(v, dict) else v
        out = []
        for p in pairs:
            if isinstance(p, dict):
                if set(p) != {"key", "value"}:
                    raise ReaderError(f"map entry with fields {sorted(p)}", EXIT_FAILURE)
                k, x = p["key"], p["value"]
            else:
                k, x = p
            out.append((_fix(k, t[1], opts), _fix(x, t[2], opts)))
        return out
    return v


def rows(arrow, columns, binary_strings: bool = False, utc_timestamps: bool = False) -> list[tuple]:
    """arrow: pyarrow.Table with (at least) the named columns; columns: [(name, type)].

    binary_strings: the engine gives every string as bytes (chDB: ClickHouse's
    String is bytes; Iceberg string columns are decoded as UTF-8, binary ones kept).
    utc_timestamps: the engine gives `timestamp` (without zone) values in UTC
    (chDB: DateTime64 in Arrow always carries a zone, here session_timezone UTC);
    they are printed without it.
    """
    opts = {"binary_strings": binary_strings, "utc_timestamps": utc_timestamps}
    import pyarrow as pa
    import pyarrow.compute as pc

    names = set(arrow.column_names)
    missing = [n for n, _ in columns if n not in names]
    if missing:
        raise ReaderError(f"the engine returned no column(s) {missing} "
                          f"(got {arrow.column_names})", EXIT_FAILURE)
    lists = []
    for name, t in columns:
        col = arrow.column(name)
        if t in ("timestamp_ns", "timestamptz_ns"):
            col = pc.cast(col, pa.int64())
        elif t == "timestamptz" and pa.types.is_timestamp(col.type) and col.type.tz is None:
            raise ReaderError(f"column {name}: timestamptz read without a time zone",
                              EXIT_FAILURE)
        vals = col.to_pylist()
        lists.append([_fix(v, t, opts) for v in vals])
    if not columns:
        return [()] * arrow.num_rows
    return list(zip(*lists))
