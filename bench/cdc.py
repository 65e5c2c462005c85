"""Change events (bench/run --cdc N): N change events of the seeds' orders
rows, 50% updates of an earlier key and 5% deletes (each delete followed by
its tombstone, as Debezium sends it), the rest inserts, in three topics of
the same keys and rows:

- `plain`: the rows themselves (the `after`), a tombstone for a delete,
  synced as an ordinary upsert on the message key (`dedup_keys =
  ["_kafka_key"]`);
- `debezium`: Debezium's JSON envelope without its schema
  (`schemas.enable=false`), `change_events = "debezium"`;
- `debezium_schema`: the same with the Connect schema in every key and
  value (`schemas.enable=true`, Kafka Connect's default), so `amount` is a
  `decimal(10,2)` sent as base64 bytes and the times `ZonedTimestamp`s.

Each topic is synced once from the start into a new table (upsert, format
v2, position deletes); kcat reads each topic before its sync as the ceiling.
Reports msg/s and CPU µs per message of each, and the ratio of each
change-event sync's CPU per message to the plain upsert's.
"""

import base64
import json
import os
import random
import subprocess
import tempfile
import uuid

KEY_SCHEMA = {"type": "struct", "optional": False, "name": "bench.public.orders.Key",
              "fields": [{"type": "int64", "optional": False, "field": "id"}]}
VALUE_FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "int64", "optional": True, "field": "customer_id"},
    {"type": "string", "optional": True, "field": "product"},
    {"type": "bytes", "optional": True, "field": "amount", "name": "org.apache.kafka.connect.data.Decimal",
     "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"type": "string", "optional": True, "field": "status"},
    {"type": "string", "optional": True, "field": "created_at", "name": "io.debezium.time.ZonedTimestamp"},
    {"type": "string", "optional": True, "field": "updated_at", "name": "io.debezium.time.ZonedTimestamp"},
]
SOURCE_FIELDS = [
    {"type": "string", "optional": False, "field": "version"},
    {"type": "string", "optional": False, "field": "connector"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"},
    {"type": "string", "optional": False, "field": "db"},
    {"type": "string", "optional": True, "field": "sequence"},
    {"type": "string", "optional": False, "field": "schema"},
    {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "txId"},
    {"type": "int64", "optional": True, "field": "lsn"},
]


def envelope_schema():
    value = {"type": "struct", "optional": True, "name": "bench.public.orders.Value", "fields": VALUE_FIELDS}
    return {"type": "struct", "optional": False, "name": "bench.public.orders.Envelope", "version": 2, "fields": [
        {**value, "field": "before"}, {**value, "field": "after"},
        {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source",
         "fields": SOURCE_FIELDS, "field": "source"},
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ]}


def events(rng, n, times):
    """(key, op, row) for n changes; row None for a delete."""
    live, next_id = [], 1
    for _ in range(n):
        r = rng.random()
        if live and r < 0.05:
            key = live.pop(rng.randrange(len(live)))
            yield key, "d", None
            continue
        if live and r < 0.55:
            key, op = live[rng.randrange(len(live))], "u"
        else:
            key, op, next_id = next_id, "c", next_id + 1
            live.append(key)
        bits = rng.getrandbits(48)
        t = times[bits & 4095]
        yield key, op, {"id": key, "customer_id": (bits >> 28) % 100000,
                        "product": ["Headphones", "Keyboard", "Monitor", "Desk Lamp"][(bits >> 6) & 3],
                        "amount": (bits >> 12) % 50000, "status": ["placed", "shipped", "delivered"][(bits >> 9) % 3],
                        "created_at": t, "updated_at": t}


def lines(kind, rng, n, times):
    """kcat -K'\\t' -Z lines of `kind` (an empty value is a tombstone)."""
    schema = json.dumps(envelope_schema(), separators=(",", ":"))
    lsn = 10_000_000
    for key, op, row in events(rng, n, times):
        lsn += 1 + rng.randrange(200)
        if kind == "plain":
            key_text = json.dumps({"id": key})
        elif kind == "debezium":
            key_text = json.dumps({"id": key})
        else:
            key_text = json.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}}, separators=(",", ":"))
        if row is not None and kind == "plain":
            value = dict(row, amount=row["amount"] / 100)
            yield f"{key_text}\t{json.dumps(value, separators=(',', ':'))}\n"
            continue
        if row is None and kind == "plain":
            yield f"{key_text}\t\n"
            continue
        after = row
        if kind == "debezium_schema" and row is not None:
            after = dict(row, amount=base64.b64encode(row["amount"].to_bytes(4, "big", signed=True)).decode())
        elif row is not None:
            after = dict(row, amount=row["amount"] / 100)
        ts = 1_796_000_000_000 + lsn // 1000
        payload = {"before": None, "after": after,
                   "source": {"version": "3.6.1.Final", "connector": "postgresql", "name": "bench", "ts_ms": ts,
                              "db": "shop", "sequence": f'["{lsn - 1}","{lsn}"]', "schema": "public",
                              "table": "orders", "txId": lsn // 3, "lsn": lsn},
                   "op": op, "ts_ms": ts + 3}
        payload_text = json.dumps(payload, separators=(",", ":"))
        value = payload_text if kind == "debezium" else f'{{"schema":{schema},"payload":{payload_text}}}'
        yield f"{key_text}\t{value}\n"
        if row is None:
            yield f"{key_text}\t\n"


def produce(bootstrap, topic, lines_):
    proc = subprocess.Popen(["kcat", "-b", bootstrap, "-P", "-t", topic, "-K", "\t", "-Z",
                             "-X", "linger.ms=20", "-X", "batch.num.messages=10000",
                             "-X", "queue.buffering.max.messages=1000000",
                             "-X", "queue.buffering.max.kbytes=1048576"], stdin=subprocess.PIPE)
    chunk = []
    for line in lines_:
        chunk.append(line)
        if len(chunk) == 10000:
            proc.stdin.write("".join(chunk).encode())
            chunk.clear()
    proc.stdin.write("".join(chunk).encode())
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError(f"kcat could not produce to {topic}")


STREAMS = {
    "plain": 'dedup_keys = ["_kafka_key"]\n',
    "debezium": 'change_events = "debezium"\n',
    "debezium_schema": 'change_events = "debezium"\n',
}


def run(bench, binary, env, n):
    bootstrap = env["TESTBED_KAFKA_BOOTSTRAP"]
    out = {"events": n, "kinds": {}}
    for kind in ("plain", "debezium", "debezium_schema"):
        topic = f"bench2_cdc_{kind}_{n}"
        size = bench.topic_size(bootstrap, topic)
        if size is None or size < n:
            subprocess.run([os.path.join(bench.REPO, "scripts/testbed"), "create-topic", topic,
                            str(bench.PARTITIONS)], check=True, stdout=subprocess.DEVNULL)
            rng = random.Random(f"cdc-{n}")
            print(f"  loading {topic} ...", flush=True)
            produce(bootstrap, topic, lines(kind, rng, n, bench.times(rng, 4096)))
        messages = bench.topic_size(bootstrap, topic)
        kcat = bench.kcat_ceiling(bootstrap, topic)
        run_id = uuid.uuid4().hex[:8]
        dir_ = tempfile.mkdtemp(prefix=f"topicberg-bench-cdc-{run_id}-")
        job = bench.job_file(dir_, env, run_id, topic, "upsert", "position")
        with open(job) as f:
            text = f.read()
        with open(job, "w") as f:
            f.write(text.replace('dedup_keys = ["id"]\n', STREAMS[kind]))
        try:
            m = bench.sync(binary, job, dir_)
        finally:
            bench.drop_run_tables(env, run_id)
        m["topic_messages"] = messages
        m["msgs_per_s"] = round(messages / m["wall_s"])
        m["cpu_us_per_msg"] = round(m["cpu_s"] * 1e6 / messages, 2)
        m["kcat_cpu_us_per_msg"] = round(kcat["cpu_s"] * 1e6 / messages, 2)
        m["kcat_msgs_per_s"] = round(messages / kcat["wall_s"])
        out["kinds"][kind] = m
        print(f"  {kind}: {m['msgs_per_s']:,} msg/s, {m['cpu_us_per_msg']} CPU µs/msg "
              f"(kcat {m['kcat_cpu_us_per_msg']}), rows {m['rows_committed']}, "
              f"deletes {m['deletes']}, peak RSS {m['peak_rss_mib']} MiB", flush=True)
    plain = out["kinds"]["plain"]["cpu_us_per_msg"]
    for kind in ("debezium", "debezium_schema"):
        out["kinds"][kind]["cpu_ratio_to_plain"] = round(out["kinds"][kind]["cpu_us_per_msg"] / plain, 2)
    return out
