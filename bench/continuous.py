#!/usr/bin/env python3
"""End-to-end latency of `topicberg sync --follow` (run by `bench/run
--continuous RATE,SECONDS,INTERVAL` with the test bed's Python, which has
confluent-kafka).

A producer sends RATE messages a second for SECONDS seconds to a fresh
5-partition topic, each stamped with its *planned* send time (start + i /
RATE), so a producer that falls behind cannot hide the delay; a run whose
producer ends more than 1% of SECONDS behind its schedule is marked
invalid. A poller loads the table from the REST catalog every 100 ms and
reads the offsets its current state records (table property
`topicberg.offsets.<topic>`, set in the same commit as the data: the moment
a reader can see the rows). A message's latency is the first poll that
shows its offset committed minus its planned send time. Reported: p50,
p99 and max over the messages planned after the warm-up, the follower's
CPU per message over the same window (from /proc), and its totals.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

PARTITIONS = 5
POLL_INTERVAL = 0.1


def rest(uri, credential, warehouse):
    """A minimal REST catalog client: a token, then the config's prefix."""
    client_id, secret = credential.split(":", 1)
    body = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                                   "client_secret": secret, "scope": "PRINCIPAL_ROLE:ALL"}).encode()
    with urllib.request.urlopen(f"{uri}/v1/oauth/tokens", body) as r:
        token = json.load(r)["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    req = urllib.request.Request(f"{uri}/v1/config?warehouse={urllib.parse.quote(warehouse)}", headers=headers)
    with urllib.request.urlopen(req) as r:
        prefix = json.load(r).get("overrides", {}).get("prefix")
    base = f"{uri}/v1/{prefix}" if prefix else f"{uri}/v1"
    return base, headers


def committed_offsets(base, headers, namespace, table, topic):
    """{partition: next offset} the table's current state records, or None
    before the table exists."""
    req = urllib.request.Request(f"{base}/namespaces/{namespace}/tables/{table}", headers=headers)
    try:
        with urllib.request.urlopen(req) as r:
            props = json.load(r)["metadata"].get("properties", {})
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    record = props.get(f"topicberg.offsets.{topic}")
    return {int(p): n for p, n in json.loads(record).items()} if record else {}


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def job_text(env, topic, namespace, interval, state_dir):
    return f"""name = "{namespace}"
target_engines = ["spark"]

[source]
bootstrap_servers = "{env['TESTBED_KAFKA_BOOTSTRAP']}"
topic_pattern = "^{topic}$"

[destination]
catalog = "rest"
uri = "{env['TESTBED_FIXTURE_URI']}"
warehouse = "{env['TESTBED_FIXTURE_WAREHOUSE']}"
credential = "{env['TESTBED_FIXTURE_CREDENTIAL']}"
s3_endpoint = "{env['TESTBED_S3_ENDPOINT']}"
s3_region = "{env['TESTBED_S3_REGION']}"
s3_access_key = "{env['TESTBED_S3_ACCESS_KEY']}"
s3_secret_key = "{env['TESTBED_S3_SECRET_KEY']}"
namespace = "{namespace}"

[sync]
state_dir = "{state_dir}"
commit_interval = "{interval}"
"""


class Poller(threading.Thread):
    """Every 100 ms: the table's committed offsets; each advance with the
    time it was first seen."""

    def __init__(self, env, namespace, topic):
        super().__init__(daemon=True)
        self.args = (namespace, topic, topic)
        self.base, self.headers = rest(env["TESTBED_FIXTURE_URI"], env["TESTBED_FIXTURE_CREDENTIAL"],
                                       env["TESTBED_FIXTURE_WAREHOUSE"])
        self.events = []  # (seen at, partition, next offset)
        self.latest = {}
        self.stop = threading.Event()
        self.polls = 0

    def run(self):
        while not self.stop.is_set():
            started = time.time()
            offsets = committed_offsets(self.base, self.headers, *self.args) or {}
            self.polls += 1
            for p, n in offsets.items():
                if n > self.latest.get(p, 0):
                    self.latest[p] = n
                    self.events.append((started, p, n))
            self.stop.wait(max(0.0, POLL_INTERVAL - (time.time() - started)))


def produce(env, topic, rate, seconds):
    """Sends rate * seconds messages on schedule; per partition the
    (offset, planned time) of each, and how far behind the schedule the
    producer ended, in seconds.

    Message j goes to partition j % PARTITIONS of a fresh topic through one
    idempotent producer, so its offset is j // PARTITIONS: no delivery
    callback per message (which alone held the producer under 50,000
    msg/s); the partitions' high watermarks are checked at the end."""
    producer = Producer({"bootstrap.servers": env["TESTBED_KAFKA_BOOTSTRAP"], "linger.ms": 5,
                         "acks": "all", "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000})
    total = rate * seconds
    start = time.time() + 0.5
    tick = max(1, rate // 100)  # messages per 10 ms
    pad = "x" * 100
    i = 0
    while i < total:
        planned_tick = start + i / rate
        ahead = planned_tick - time.time()
        if ahead > 0:
            time.sleep(ahead)
        for j in range(i, min(i + tick, total)):
            value = '{"id":%d,"planned":%.6f,"pad":"%s"}' % (j, start + j / rate, pad)
            producer.produce(topic, value=value, key=str(j), partition=j % PARTITIONS)
        i += tick
        producer.poll(0)
    behind = time.time() - (start + (total - 1) / rate)
    if producer.flush(60) != 0:
        raise RuntimeError("messages still unsent after 60 s")
    consumer = Consumer({"bootstrap.servers": env["TESTBED_KAFKA_BOOTSTRAP"], "group.id": "bench-watermarks"})
    delivered = {p: [] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        count = len(range(p, total, PARTITIONS))
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        if high != count:
            raise RuntimeError(f"partition {p} holds {high} messages, {count} were sent")
        delivered[p] = [(j // PARTITIONS, start + j / rate) for j in range(p, total, PARTITIONS)]
    consumer.close()
    return delivered, behind, start


def latencies(delivered, events, after):
    """Latency (s) of each delivered message planned at or after `after`."""
    out = []
    by_partition = {}
    for seen, p, n in sorted(events):
        by_partition.setdefault(p, []).append((seen, n))
    for p, messages in delivered.items():
        visible = by_partition.get(p, [])
        k = 0
        for offset, planned in sorted(messages):
            while k < len(visible) and visible[k][1] <= offset:
                k += 1
            if k == len(visible):
                return None  # not all visible
            if planned >= after:
                out.append(visible[k][0] - planned)
    return out


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--rate", type=int, required=True, help="messages a second")
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--interval", required=True, help="commit_interval, e.g. 1s")
    ap.add_argument("--warmup", type=int, default=10, help="seconds left out of the figures")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    env = os.environ
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run_id = uuid.uuid4().hex[:8]
    topic = f"bench_cont_{run_id}"
    namespace = f"bench_cont_{run_id}"
    subprocess.run([os.path.join(repo, "scripts/testbed"), "create-topic", topic, str(PARTITIONS)],
                   check=True, stdout=subprocess.DEVNULL)
    work = tempfile.mkdtemp(prefix="bench-continuous-")
    job = os.path.join(work, "job.toml")
    with open(job, "w") as f:
        f.write(job_text(env, topic, namespace, args.interval, os.path.join(work, "state")))
    report = os.path.join(work, "follow.json")
    log = open(os.path.join(work, "follow.log"), "w")
    follower = subprocess.Popen([args.binary, "sync", "-c", job, "--follow", "--report-json", report],
                                stdout=subprocess.DEVNULL, stderr=log, env={**env, "TOPICBERG_LOG": "info"})
    poller = Poller(env, namespace, topic)
    poller.start()
    cpu = {}
    timer = threading.Timer(args.warmup, lambda: cpu.update(start=cpu_seconds(follower.pid), at=time.time()))
    timer.start()
    delivered, behind, start = produce(env, topic, args.rate, args.seconds)
    cpu["end"] = cpu_seconds(follower.pid)
    cpu["end_at"] = time.time()
    produced = sum(len(v) for v in delivered.values())
    deadline = time.time() + 120
    expected = {p: (max(o for o, _ in v) + 1) for p, v in delivered.items() if v}
    while time.time() < deadline and any(poller.latest.get(p, 0) < n for p, n in expected.items()):
        time.sleep(0.1)
    poller.stop.set()
    poller.join()
    follower.send_signal(signal.SIGTERM)
    code = follower.wait(timeout=120)
    with open(report) as f:
        follow_report = json.load(f)
    lat = latencies(delivered, poller.events, start + args.warmup)
    window = args.rate * (cpu["end_at"] - cpu["at"])
    result = {
        "rate": args.rate, "seconds": args.seconds, "commit_interval": args.interval, "warmup_s": args.warmup,
        "messages": produced, "producer_behind_s": round(behind, 3),
        "valid": behind <= 0.01 * args.seconds and lat is not None,
        "latency_ms": None if not lat else {
            "p50": round(statistics.median(lat) * 1000), "p99": round(percentile(lat, 0.99) * 1000),
            "max": round(max(lat) * 1000), "messages": len(lat)},
        "follower_cpu_us_per_msg": round((cpu["end"] - cpu["start"]) * 1e6 / window, 2),
        "follower_exit": code, "follower": follow_report, "polls": poller.polls,
        "work_dir": work,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "follower"}, indent=1))
    if not result["valid"]:
        sys.exit("bench: the run does not count (producer behind its schedule, or messages never visible)")


if __name__ == "__main__":
    main()
