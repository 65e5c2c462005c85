#!/usr/bin/env python3
"""Loads the "trips" shape as registry-framed Avro (what a Confluent producer
writes: magic byte 0, the 4-byte schema id, the Avro body), for bench/run.

    load_avro.py BOOTSTRAP REGISTRY_URL TOPIC PARTITIONS SEED < keys

Reads one key (an integer) per stdin line; registers the trips schema under
TOPIC-value (TopicNameStrategy) and writes one message per key, the key as
its decimal text, partitioned by the key's murmur2 like the Java client.
The columns match what JSON inference gives the JSON trips shape (long,
timestamptz, double, string), so the two shapes compare like with like.
Run with the test bed's Python (fastavro, confluent-kafka).
"""

import io
import json
import random
import struct
import sys
import urllib.request

import fastavro
from confluent_kafka import Producer

SCHEMA = {
    "type": "record",
    "name": "Trip",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "vendor", "type": "long"},
        {"name": "pickup", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "dropoff", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "pax", "type": "long"},
        {"name": "distance", "type": "double"},
        {"name": "fare", "type": "double"},
        {"name": "payment", "type": "string"},
    ],
}
PAYMENTS = ["card", "cash", "free", "disp"]
BASE_MICROS = 1_793_491_200_000_000  # 2026-11-01T00:00:00Z


def register(registry, topic):
    body = json.dumps({"schema": json.dumps(SCHEMA)}).encode()
    request = urllib.request.Request(
        f"{registry.rstrip('/')}/subjects/{topic}-value/versions",
        data=body,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["id"]


def main():
    bootstrap, registry, topic, partitions, seed = sys.argv[1:6]
    schema_id = register(registry, topic)
    header = b"\x00" + struct.pack(">I", schema_id)
    parsed = fastavro.parse_schema(SCHEMA)
    rng = random.Random(seed)
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
        "partitioner": "murmur2_random",
    })
    out = io.BytesIO()
    count = 0
    for line in sys.stdin:
        key = int(line)
        r = rng.getrandbits(48)
        dist = (r >> 24) % 3000
        fare = (r >> 30) % 9000
        record = {
            "id": key,
            "vendor": r % 3 + 1,
            "pickup": BASE_MICROS + (r & 0xFFFFF) * 1_000_000,
            "dropoff": BASE_MICROS + ((r >> 20) & 0xFFFFF) * 1_000_000,
            "pax": (r >> 4) % 5 + 1,
            "distance": dist / 100,
            "fare": fare / 100,
            "payment": PAYMENTS[(r >> 8) & 3],
        }
        out.seek(0)
        out.truncate()
        fastavro.schemaless_writer(out, parsed, record)
        while True:
            try:
                producer.produce(topic, key=str(key).encode(), value=header + out.getvalue())
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        sys.exit("load_avro: not every message was delivered")
    print(json.dumps({"schema_id": schema_id, "count": count}))


if __name__ == "__main__":
    main()
