#!/usr/bin/env python3
"""Create (replacing it if it exists) a small Iceberg table with every column type
topicberg writes for Avro / Protobuf topics, with PyIceberg (PyArrow):

  make_types_table.py [catalog args] [--format-version 2|3] [--shape types|time] namespace.table
  make_types_table.py --print-expected [--shape types|time]

--shape types (default): long, int, float, double, boolean, string,
decimal(9,2), decimal(38,10), decimal(5,0), date, timestamp, timestamptz, uuid,
binary, fixed[4], and nested struct (with a struct inside), list<long>,
list<struct>, map<string,long>, map<int,string>, map<string,struct<..list..>>,
with nulls at the top level and inside nested values, negative and pre-1970
values, NaN/-Infinity/-0.0 and non-ASCII text.

--shape time: id long, time, struct<time>, list<time>. Iceberg `time` is its
own table because Spark (Iceberg's Spark 3.5 runtime) cannot load any table
with a time column ("Spark does not support time fields"), nested or not.

--print-expected prints the rows in the canonical form of common.py (sorted),
without touching a table. A v3 table is written as v2 and upgraded (see
make_sample_table.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import math
import os
import struct
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import EXIT_FAILURE, ReaderError  # noqa: E402

UTC = dt.timezone.utc
D = decimal.Decimal
U = uuid.UUID


def f32(x: float) -> float:
    """x rounded to a 32-bit float (what a `float` column holds), as a double."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# --- shape "types" -------------------------------------------------------------
# (name, canonical type tree); the Iceberg schema below must say the same.
TYPES_COLUMNS = [
    ("id", "long"),
    ("i", "int"),
    ("f", "float"),
    ("d", "double"),
    ("b", "boolean"),
    ("s", "string"),
    ("dec_small", ("decimal", 9, 2)),
    ("dec_big", ("decimal", 38, 10)),
    ("dec_int", ("decimal", 5, 0)),
    ("day", "date"),
    ("ts", "timestamp"),
    ("tstz", "timestamptz"),
    ("u", "uuid"),
    ("bin", "binary"),
    ("fx", "binary"),  # Iceberg fixed[4]: canonical like binary
    ("st", ("struct", [("a", "long"), ("b", "string"),
                       ("inner", ("struct", [("x", "double"), ("at", "timestamp")]))])),
    ("lst", ("list", "long")),
    ("lst_st", ("list", ("struct", [("k", "string"), ("v", ("decimal", 10, 3))]))),
    ("mp", ("map", "string", "long")),
    ("mp_int", ("map", "int", "string")),
    ("mp_st", ("map", "string", ("struct", [("n", "long"), ("tags", ("list", "string"))]))),
]

TYPES_ROWS = [
    dict(id=1, i=42, f=f32(0.1), d=99.19, b=True, s="São Paulo",
         dec_small=D("12.30"), dec_big=D("1234567890123456789012345678.0123456789"),
         dec_int=D("99999"), day=dt.date(2026, 1, 2),
         ts=dt.datetime(2026, 1, 2, 3, 4, 5, 123456),
         tstz=dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
         u=U("123e4567-e89b-12d3-a456-426614174000"), bin=b"\x00\x01\x02\xff", fx=b"\x01\x02\x03\x04",
         st={"a": 7, "b": "x", "inner": {"x": 1.5, "at": dt.datetime(2000, 1, 1, 0, 0, 0, 1)}},
         lst=[1, None, -3], lst_st=[{"k": "a", "v": D("1.500")}, {"k": None, "v": D("-0.001")}],
         mp={"b": 2, "a": 1, "c": None}, mp_int={10: "ten", 9: "nine", -1: None},
         mp_st={"z": {"n": 1, "tags": ["t1", None]}, "y": None, "x": {"n": None, "tags": None}}),
    dict(id=2, i=-2147483648, f=-math.inf, d=math.nan, b=False, s="Zürich — 東京 🚀",
         dec_small=D("-0.05"), dec_big=D("-0.0000000001"), dec_int=D("-1"),
         day=dt.date(1969, 12, 31),
         ts=dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
         tstz=dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
         u=U("ffffffff-ffff-ffff-ffff-ffffffffffff"), bin=b"", fx=b"\x00\x00\x00\x00",
         st={"a": None, "b": None, "inner": None},
         lst=[], lst_st=[], mp={}, mp_int={}, mp_st={}),
    dict(id=3, i=2147483647, f=3.4028234663852886e38, d=-0.0, b=None, s="",
         dec_small=D("9999999.99"), dec_big=D("0E-10"), dec_int=D("0"),
         day=dt.date(1900, 1, 1),
         ts=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
         tstz=dt.datetime(1900, 1, 1, 0, 0, 0, 0, tzinfo=UTC),
         u=U("00000000-0000-0000-0000-000000000000"), bin=b"quote \" backslash \\",
         fx=b"\xff\xfe\xfd\xfc",
         st=None, lst=None, lst_st=[None], mp=None, mp_int=None, mp_st=None),
    dict(id=4, i=None, f=None, d=None, b=None, s=None, dec_small=None, dec_big=None,
         dec_int=None, day=None, ts=None, tstz=None, u=None, bin=None, fx=None, st=None,
         lst=None, lst_st=None, mp=None, mp_int=None, mp_st=None),
    dict(id=5, i=0, f=f32(1e-07), d=1e-07, b=True, s="tab\tnewline\n",
         dec_small=D("0.00"), dec_big=D("9999999999999999999999999999.9999999999"),
         dec_int=D("12345"), day=dt.date(9999, 12, 31),
         ts=dt.datetime(1970, 1, 1, 0, 0, 0, 0),
         tstz=dt.datetime(2038, 1, 19, 3, 14, 8, 0, tzinfo=UTC),
         u=U("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), bin=b"\x80\x81", fx=b"abcd",
         st={"a": -9223372036854775808, "b": "é", "inner": {"x": None, "at": None}},
         lst=[9223372036854775807], lst_st=[{"k": "é", "v": None}],
         mp={"é": -1}, mp_int={0: ""}, mp_st={"": {"n": 0, "tags": []}}),
]

# --- shape "time" --------------------------------------------------------------
TIME_COLUMNS = [
    ("id", "long"),
    ("t", "time"),
    ("st", ("struct", [("t", "time")])),
    ("lst", ("list", "time")),
]

TIME_ROWS = [
    dict(id=1, t=dt.time(12, 34, 56, 789000), st={"t": dt.time(0, 0, 0, 1)},
         lst=[dt.time(23, 59, 59, 999999), None]),
    dict(id=2, t=dt.time(0, 0), st={"t": None}, lst=[]),
    dict(id=3, t=None, st=None, lst=None),
]

SHAPES = {"types": (TYPES_COLUMNS, TYPES_ROWS), "time": (TIME_COLUMNS, TIME_ROWS)}


def iceberg_schema(shape: str):
    from pyiceberg.schema import Schema
    from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType,
                                 FixedType, FloatType, IntegerType, ListType, LongType, MapType,
                                 NestedField, StringType, StructType, TimestampType,
                                 TimestamptzType, TimeType, UUIDType)

    def f(fid, name, t):
        return NestedField(fid, name, t, required=False)

    if shape == "time":
        return Schema(
            f(1, "id", LongType()),
            f(2, "t", TimeType()),
            f(3, "st", StructType(f(4, "t", TimeType()))),
            f(5, "lst", ListType(6, TimeType(), element_required=False)),
        )
    return Schema(
        f(1, "id", LongType()),
        f(2, "i", IntegerType()),
        f(3, "f", FloatType()),
        f(4, "d", DoubleType()),
        f(5, "b", BooleanType()),
        f(6, "s", StringType()),
        f(7, "dec_small", DecimalType(9, 2)),
        f(8, "dec_big", DecimalType(38, 10)),
        f(9, "dec_int", DecimalType(5, 0)),
        f(10, "day", DateType()),
        f(11, "ts", TimestampType()),
        f(12, "tstz", TimestamptzType()),
        f(13, "u", UUIDType()),
        f(14, "bin", BinaryType()),
        f(15, "fx", FixedType(4)),
        f(16, "st", StructType(
            f(17, "a", LongType()),
            f(18, "b", StringType()),
            f(19, "inner", StructType(f(20, "x", DoubleType()), f(21, "at", TimestampType()))),
        )),
        f(22, "lst", ListType(23, LongType(), element_required=False)),
        f(24, "lst_st", ListType(25, StructType(
            f(26, "k", StringType()), f(27, "v", DecimalType(10, 3))), element_required=False)),
        f(28, "mp", MapType(29, StringType(), 30, LongType(), value_required=False)),
        f(31, "mp_int", MapType(32, IntegerType(), 33, StringType(), value_required=False)),
        f(34, "mp_st", MapType(35, StringType(), 36, StructType(
            f(37, "n", LongType()),
            f(38, "tags", ListType(39, StringType(), element_required=False)),
        ), value_required=False)),
    )


def arrow_value(v):
    """Python row values -> what pyarrow's from_pylist takes for the Iceberg
    schema's Arrow types (uuid: 16 bytes; maps: lists of pairs)."""
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, dict):
        return {k: arrow_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [arrow_value(x) for x in v]
    return v


def arrow_table(shape: str, schema):
    import pyarrow as pa

    columns, rows = SHAPES[shape]
    arrow_schema = schema.as_arrow()
    data = []
    for r in rows:
        row = {}
        for name, t in columns:
            row[name] = _maps_to_pairs(arrow_value(r[name]), t)
        data.append(row)
    return pa.Table.from_pylist(data, schema=arrow_schema)


def _maps_to_pairs(v, t):
    """Maps (at any depth) as lists of pairs for pyarrow."""
    if v is None:
        return None
    if isinstance(t, tuple):
        if t[0] == "map":
            return [(k, _maps_to_pairs(x, t[2])) for k, x in v.items()]
        if t[0] == "struct":
            return {n: _maps_to_pairs(v.get(n), ft) for n, ft in t[1]}
        if t[0] == "list":
            return [_maps_to_pairs(x, t[1]) for x in v]
    return v


def expected_lines(shape: str) -> list[bytes]:
    columns, rows = SHAPES[shape]
    return common.serialize_rows(columns, [[r[n] for n, _ in columns] for r in rows])


def create(cfg: common.CatalogConfig, table: common.TableName, format_version: int,
           shape: str) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError

    from make_sample_table import upgrade_to_v3
    from pyiceberg_reader import load_catalog, patch_null_nested

    # Without it PyIceberg writes the null list<struct> / map<string,struct>
    # values as empty ones (apache/iceberg-python#3833).
    patch_null_nested()
    cat = load_catalog(cfg)
    try:
        cat.create_namespace(table.namespace)
    except NamespaceAlreadyExistsError:
        pass
    ident = table.namespace + (table.name,)
    try:
        cat.drop_table(ident)
    except NoSuchTableError:
        pass
    schema = iceberg_schema(shape)
    tbl = cat.create_table(ident, schema=schema, properties={"format-version": "2"})
    data = arrow_table(shape, tbl.schema())
    # Two appends: two data files (the second holds the all-null row).
    tbl.append(data.slice(0, 3))
    tbl.append(data.slice(3))
    if format_version == 3:
        upgrade_to_v3(cat, table, tbl)
    tbl = cat.load_table(ident)
    if tbl.metadata.format_version != format_version:
        raise ReaderError(f"table is format-version {tbl.metadata.format_version}, "
                          f"wanted {format_version}", EXIT_FAILURE)
    sys.stderr.write(f"make_types_table: {table.dotted} ({shape}) format-version "
                     f"{tbl.metadata.format_version}, {data.num_rows} rows\n")


def main() -> None:
    p = argparse.ArgumentParser(prog="make_types_table.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_catalog_args(p)
    p.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    p.add_argument("--shape", choices=sorted(SHAPES), default="types")
    p.add_argument("--print-expected", action="store_true",
                   help="print the canonical rows of the shape and exit")
    p.add_argument("table", nargs="?", help="namespace.table")
    args = p.parse_args()

    if args.print_expected:
        common.write_lines(expected_lines(args.shape))
        return
    if not args.table:
        p.error("the following arguments are required: table")
    try:
        cfg = common.resolve_catalog(args)
        table = common.parse_table(args.table)
        common.check_catalog_reachable(cfg)
        create(cfg, table, args.format_version, args.shape)
    except ReaderError as e:
        common.die("make_types_table", str(e), e.code)


if __name__ == "__main__":
    main()
