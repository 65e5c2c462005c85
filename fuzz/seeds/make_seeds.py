#!/usr/bin/env python3
"""Writes the seed corpus of the `decode` fuzz target (fuzz/seeds/decode/).

Each seed is one fuzz input in the layout fuzz_targets/decode.rs documents:
table byte, config byte, key-column byte, then records separated by 0xFF,
each `flags | key length | key | value`. The messages are the seed topics'
shapes from scripts/demo.d/sample_messages.py, plus a few edge cases.
Run from the repository root: python3 fuzz/seeds/make_seeds.py
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "decode")
SAMPLES = os.path.join(ROOT, "scripts", "demo.d", "sample_messages.py")

UPSERT, COLLECT, ALLOW = 1, 2, 4
TOMBSTONE, NO_KEY, NO_TS, FINISH, TAKE, TS_OVERFLOW = 1, 2, 4, 8, 16, 32


def samples(topic, batch):
    out = subprocess.run([sys.executable, SAMPLES, topic, batch], check=True,
                         capture_output=True, text=True).stdout
    return [line.split("\t", 1) for line in out.splitlines()]


def record(key, value, flags=0):
    key = key.encode()
    return bytes([flags, len(key)]) + key + value.encode()


def seed(name, table, config, keys, records):
    data = bytes([table, config, keys]) + b"\xff".join(records)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    orders = samples("orders", "first")[:4]
    orders2 = samples("orders", "second")[-3:]
    customers = samples("customers", "first")[:3]
    customers2 = samples("customers", "second")
    seed("orders-append", 0, 0, 0, [record(k, v) for k, v in orders])
    seed("orders-upsert", 0, UPSERT, 0,
         [record(k, v) for k, v in orders[:2]]
         + [record("1", "", TOMBSTONE), record("", orders[0][1], NO_KEY | FINISH)]
         + [record(k, v) for k, v in orders2])
    bad = json.loads(orders[0][1])
    bad["amount"] = "abc"
    seed("orders-bad-amount", 0, 0, 0,
         [record(orders[0][0], orders[0][1]), record("1", json.dumps(bad)),
          record(orders[1][0], orders[1][1], NO_TS)])
    extra = json.loads(customers[0][1])
    extra["coupon"] = "SAVE10"
    seed("customers-collect", 1, COLLECT, 0,
         [record(k, v) for k, v in customers]
         + [record("1", json.dumps(extra, ensure_ascii=False), TAKE)])
    seed("customers-upsert-key", 1, UPSERT | ALLOW, 8,
         [record(k, v, TS_OVERFLOW) for k, v in customers2])
    every = {"l": 1, "i": 2, "d": 1.5, "b": True, "s": "x\u00e9\n", "t": "2026-10-29T15:22:04Z",
             "j": {"a": [1, None]}, "_kafka_offset": 9}
    seed("every-type", 2, COLLECT, 3,
         [record("k", json.dumps(every)), record("k", '{"l":null,"i":2147483648}'),
          record("k", '{"d":1e309,"x":1}'), record("k", '{"j":[1e309],"j":"dup","s":"\\ud83d\\ude00"}')])
    seed("evolved", 3, UPSERT, 2,
         [record("", '{"i":1,"s":"a","b":false,"j":null,"d":-0.0,"t":"2026-10-29 15:22:04.5+05:30"}')])


if __name__ == "__main__":
    main()
