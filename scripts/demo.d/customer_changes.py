#!/usr/bin/env python3
"""The demo's change stream: the sample customers as Debezium's PostgreSQL
connector writes a table's changes (JSON with the Connect schema, Kafka
Connect's default), to the topic `shop.public.customers`.

  customer_changes.py first    the connector's snapshot of customers 1-8 (op r)
  customer_changes.py second   customer 3 moves (op u), customer 5 is deleted
                               (op d, then its tombstone), customer 9 is new (op c)

Prints `key<TAB>value` lines for `kcat -K '\\t' -Z` (an empty value is the
tombstone). The data is fixed, so every run produces the same bytes. A real
connector against a real PostgreSQL is in the test bed: `scripts/testbed up
postgres connect` (see docs/src/how-to/change-data-capture.md).
"""
import json
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from sample_messages import customer, T0, T1  # noqa: E402

FIELDS = [("id", "int32", None), ("name", "string", None), ("email", "string", None),
          ("city", "string", None), ("tier", "string", None),
          ("created_at", "string", "io.debezium.time.ZonedTimestamp"),
          ("updated_at", "string", "io.debezium.time.ZonedTimestamp")]


def field(name, ty, semantic, optional=True):
    f = {"type": ty, "optional": optional, "field": name}
    if semantic:
        f["name"] = semantic
    return f


ROW = {"type": "struct", "optional": True, "name": "shop.public.customers.Value",
       "fields": [field(n, t, s, optional=(n != "id")) for n, t, s in FIELDS]}
SOURCE = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source",
          "field": "source", "fields": [field("db", "string", None, False),
                                        field("table", "string", None, False),
                                        field("lsn", "int64", None),
                                        field("ts_ms", "int64", None, False)]}
VALUE_SCHEMA = {"type": "struct", "optional": False, "name": "shop.public.customers.Envelope",
                "fields": [dict(ROW, field="before"), dict(ROW, field="after"), SOURCE,
                           field("op", "string", None, False), field("ts_ms", "int64", None)]}
KEY_SCHEMA = {"type": "struct", "optional": False, "name": "shop.public.customers.Key",
              "fields": [field("id", "int32", None, False)]}


def event(op, before, after, lsn, ms):
    source = {"db": "shop", "table": "customers", "lsn": lsn, "ts_ms": ms}
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": ms + 7}
    return {"schema": VALUE_SCHEMA, "payload": payload}


def line(key_id, value):
    key = {"schema": KEY_SCHEMA, "payload": {"id": key_id}}
    text = "" if value is None else json.dumps(value, separators=(",", ":"))
    return json.dumps(key, separators=(",", ":")) + "\t" + text


def changes(batch):
    snapshot_ms = 1_792_000_000_000  # 2026-10-14T...: the snapshot's time
    if batch == "first":
        return [line(i, event("r", None, customer(i), 24_000_000, snapshot_ms)) for i in range(1, 9)]
    moved = customer(3, city="Lisbon", updated=T1)
    return [
        line(3, event("u", customer(3), moved, 24_000_512, snapshot_ms + 60_000)),
        line(5, event("d", customer(5), None, 24_000_640, snapshot_ms + 61_000)),
        line(5, None),
        line(9, event("c", None, customer(9, city="Pune", tier="silver", name="Maya Patel",
                                          updated=T1), 24_000_768, snapshot_ms + 62_000)),
    ]


if __name__ == "__main__":
    assert T0 < T1
    print("\n".join(changes(sys.argv[1])))
