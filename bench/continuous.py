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

With --upsert BASE the stream is an upsert one (position deletes): the
topic first gets BASE messages of keys 0..BASE-1 and a scheduled sync
makes them the table's rows (not timed); then the timed messages are half
updates of random keys written so far, half new keys.

With --peer, the same producer and poller measure the Apache Iceberg Kafka
Connect sink (bench/connect_peer.py) instead of topicberg, committing every
--interval (`iceberg.control.commit.interval-ms`); production starts once
the worker's REST API says its tasks run. The sink records no per-partition
offsets in the table, so its poller reads the current snapshot's
`total-records` R and counts messages 0..R-1 (in planned order) visible:
exact when a commit holds whole prefixes of every partition, and otherwise
off by the partitions' skew at that commit (a few milliseconds of
production). CPU is the Connect worker's (JVM) from /proc. Append only.

With --scheduled EVERY, no follower runs: `topicberg sync` (a scheduled
sync) starts every EVERY seconds while the producer runs, and once more
after it, so the same messages arrive under the same load; its CPU per
message is the syncs' CPU (`wait4` rusage) over every message produced, the
baseline a follower's CPU is compared with. Latency is reported as for a
follower (about EVERY / 2 plus a sync).

With --workers N, N followers of the job run at once (each with its own
state directory, as on machines of their own) and share the topic's
partitions through the job's consumer group (docs/src/how-to/scale-out.md);
production starts once each has logged an assignment. CPU is the sum of
the workers'; "workers" gives, per table, the snapshots per minute over
the run (all workers' committed rounds), the commit retries (conflicts
with another writer's commit), superseded rounds and handed file sets.

With --sample-every N, a sampler records every N seconds what must stay
flat over a long run: the follower's RSS, the table's snapshot count,
metadata.json size, manifest count, data and delete files, the
metadata files in the bucket and the bytes in the follower's state folder
(its key indexes and spill); the rounds' durations come from the
follower's log. "flat" compares each figure's largest value in the window
from minute 5 to minute 10 with its largest in the last 5 minutes; the
rounds' durations are compared by their 99th percentile too
("round_ms_p99"): the largest of ~300 rounds is one round. Two figures
are peaks whatever the sampling: "peak_rss_mb" (the kernel's high-water
mark, reset at each sample) and the data and delete files at every
commit ("data_files_at_commits", from each snapshot's summary).
"""

import argparse
import json
import os
import signal
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


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def peak_rss_mb(pid):
    """The largest RSS since the last call (VmHWM, then reset through
    clear_refs), so a sample sees a peak between samples too."""
    peak = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None  # not ours to reset: the figure would be since the start
    return peak


def folder_bytes(folder):
    """The bytes of every file under a folder (the follower's state: the
    key indexes and the spill)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass  # removed while walking
    return total


class Sampler(threading.Thread):
    """Every `every` seconds: the follower's RSS and the table's state."""

    def __init__(self, env, namespace, topic, pid, every, state_dir=None):
        super().__init__(daemon=True)
        from pyarrow import fs
        from pyiceberg.catalog.rest import RestCatalog
        self.catalog = RestCatalog("bench", **{
            "uri": env["TESTBED_FIXTURE_URI"], "warehouse": env["TESTBED_FIXTURE_WAREHOUSE"],
            "credential": env["TESTBED_FIXTURE_CREDENTIAL"], "scope": "PRINCIPAL_ROLE:ALL",
            "s3.endpoint": env["TESTBED_S3_ENDPOINT"], "s3.region": env["TESTBED_S3_REGION"],
            "s3.access-key-id": env["TESTBED_S3_ACCESS_KEY"], "s3.secret-access-key": env["TESTBED_S3_SECRET_KEY"]})
        endpoint = urllib.parse.urlparse(env["TESTBED_S3_ENDPOINT"])
        self.fs = fs.S3FileSystem(endpoint_override=endpoint.netloc, scheme=endpoint.scheme,
                                  access_key=env["TESTBED_S3_ACCESS_KEY"], secret_key=env["TESTBED_S3_SECRET_KEY"],
                                  region=env["TESTBED_S3_REGION"])
        self.base, self.headers = rest(env["TESTBED_FIXTURE_URI"], env["TESTBED_FIXTURE_CREDENTIAL"],
                                       env["TESTBED_FIXTURE_WAREHOUSE"])
        self.table_id, self.pid, self.every = (namespace, topic), pid, every
        self.state_dir = state_dir
        self.samples = []
        self.seen, self.commits = set(), []
        self.stop = threading.Event()
        self.started = time.time()

    def sample(self):
        out = {"at_s": round(time.time() - self.started), "rss_mb": rss_mb(self.pid),
               "peak_rss_mb": peak_rss_mb(self.pid), "cpu_s": cpu_seconds(self.pid)}
        if self.state_dir:
            out["state_dir_bytes"] = folder_bytes(self.state_dir)
        req = urllib.request.Request(f"{self.base}/namespaces/{self.table_id[0]}/tables/{self.table_id[1]}",
                                     headers=self.headers)
        try:
            with urllib.request.urlopen(req) as r:
                body = json.load(r)
        except urllib.error.HTTPError:
            return out
        metadata = body["metadata"]
        out["snapshots"] = len(metadata.get("snapshots", []))
        # Every snapshot committed since the last sample: the table's files
        # at each commit, so a window's largest is the peak, not where a
        # sample fell in the rise between passes.
        for snap in metadata.get("snapshots", []):
            if snap["snapshot-id"] in self.seen:
                continue
            self.seen.add(snap["snapshot-id"])
            summary = snap.get("summary", {})
            self.commits.append({"at_s": round(snap["timestamp-ms"] / 1000 - self.started, 1),
                                 "data_files": int(summary.get("total-data-files", 0)),
                                 "delete_files": int(summary.get("total-delete-files", 0))})
        location = body["metadata-location"]
        path = location.split("://", 1)[1]
        out["metadata_json_bytes"] = self.fs.get_file_info(path).size
        current = next((s for s in metadata.get("snapshots", [])
                        if s["snapshot-id"] == metadata.get("current-snapshot-id")), None)
        if current:
            summary = current.get("summary", {})
            out["data_files"] = int(summary.get("total-data-files", 0))
            out["delete_files"] = int(summary.get("total-delete-files", 0))
            table = self.catalog.load_table(self.table_id)
            out["manifests"] = len(table.current_snapshot().manifests(table.io))
        from pyarrow import fs
        folder = path.rsplit("/", 1)[0]
        out["metadata_files_in_bucket"] = len(self.fs.get_file_info(fs.FileSelector(folder, recursive=True)))
        return out

    def run(self):
        while not self.stop.wait(self.every):
            try:
                self.samples.append(self.sample())
            except Exception as e:  # a sample lost is reported, not fatal
                self.samples.append({"at_s": round(time.time() - self.started), "error": str(e)})


def round_durations(log_path, started):
    """(seconds since start, elapsed ms) of each committing round, from the
    follower's log."""
    import datetime
    import re
    out = []
    with open(log_path) as f:
        for line in f:
            if "follow round committed" not in line:
                continue
            m = re.search(r"elapsed_ms=(\d+)", line)
            stamp = line.split()[0]
            try:
                at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            if m:
                out.append((at - started, int(m.group(1))))
    return out


def flatness(samples, durations, seconds, commits=()):
    """Each figure's largest value in minutes 5-10 and in the last 5, and
    the growth between them."""
    early = (min(300, seconds / 6), min(600, seconds / 3))
    late = (seconds - 300, seconds + 60)
    out = {}
    figures = ["rss_mb", "snapshots", "metadata_json_bytes", "manifests", "data_files", "delete_files",
               "metadata_files_in_bucket", "state_dir_bytes"]
    series = {k: [(s["at_s"], s[k]) for s in samples if s.get(k) is not None] for k in figures}
    series["round_ms"] = durations
    series["peak_rss_mb"] = [(s["at_s"], s["peak_rss_mb"]) for s in samples if s.get("peak_rss_mb")]
    for k in ("data_files", "delete_files"):
        series[f"{k}_at_commits"] = [(c["at_s"], c[k]) for c in commits]
    # The follower's CPU seconds per second between samples (at a fixed
    # rate, CPU per message; compaction passes included).
    cpu = [(s["at_s"], s["cpu_s"]) for s in samples if s.get("cpu_s") is not None]
    series["cpu_s_per_s"] = [(t1, round((c1 - c0) / (t1 - t0), 4))
                             for (t0, c0), (t1, c1) in zip(cpu, cpu[1:]) if t1 > t0]
    for k, points in series.items():
        a = [v for t, v in points if early[0] <= t < early[1]]
        b = [v for t, v in points if late[0] <= t < late[1]]
        if a and b:
            out[k] = {"early_max": max(a), "late_max": max(b),
                      "growth_pct": round(100 * (max(b) - max(a)) / max(a), 1) if max(a) else None}
    a = sorted(v for t, v in durations if early[0] <= t < early[1])
    b = sorted(v for t, v in durations if late[0] <= t < late[1])
    if a and b:
        p99a, p99b = quantile(a, 0.99), quantile(b, 0.99)
        out["round_ms_p99"] = {"early": p99a, "late": p99b,
                               "growth_pct": round(100 * (p99b - p99a) / p99a, 1) if p99a else None}
    return out


def job_text(env, topic, namespace, interval, state_dir, maintain, upsert):
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
{maintain}{upsert}"""


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


class Scheduled(threading.Thread):
    """`topicberg sync` every `every` seconds until stopped, then once more;
    each sync's CPU seconds (user + system) from its rusage."""

    def __init__(self, binary, job, every, log):
        super().__init__(daemon=True)
        self.argv = [binary, "sync", "-c", job]
        self.every, self.log = every, log
        self.stop = threading.Event()
        self.runs = []  # (started, wall seconds, cpu seconds, exit code)

    def sync_once(self):
        started = time.time()
        proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log,
                                env={**os.environ, "TOPICBERG_LOG": "info"})
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.runs.append((started, time.time() - started, usage.ru_utime + usage.ru_stime, proc.returncode))

    def run(self):
        while not self.stop.is_set():
            began = time.time()
            self.sync_once()
            self.stop.wait(max(0.0, self.every - (time.time() - began)))
        self.sync_once()

    def cpu(self):
        return sum(r[2] for r in self.runs)


class PeerPoller(Poller):
    """Every 100 ms: the sink's table's `total-records`, as the
    per-partition next offsets of messages 0..R-1 (see the module doc)."""

    def __init__(self, env, namespace, table):
        threading.Thread.__init__(self, daemon=True)
        import connect_peer
        self.catalog = connect_peer.Catalog(env)
        self.namespace, self.table = namespace, table
        self.events, self.latest, self.polls = [], {}, 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            started = time.time()
            rows = self.catalog.total_records(self.namespace, self.table) or 0
            self.polls += 1
            for p in range(PARTITIONS):
                n = max(0, (rows - p + PARTITIONS - 1) // PARTITIONS)
                if n > self.latest.get(p, 0):
                    self.latest[p] = n
                    self.events.append((started, p, n))
            self.stop.wait(max(0.0, POLL_INTERVAL - (time.time() - started)))


def load_base(env, topic, base):
    """BASE messages of keys 0..BASE-1, message i to partition i % PARTITIONS
    (so its offset is i // PARTITIONS), as fast as the producer goes."""
    producer = Producer({"bootstrap.servers": env["TESTBED_KAFKA_BOOTSTRAP"], "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})
    pad = "x" * 100
    for i in range(base):
        value = '{"id":%d,"planned":0.5,"pad":"%s"}' % (i, pad)
        while True:
            try:
                producer.produce(topic, value=value, key=str(i), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("base messages still unsent after 120 s")


def produce(env, topic, rate, seconds, base=0):
    """Sends rate * seconds messages on schedule; per partition the
    (offset, planned time) of each, and how far behind the schedule the
    producer ended, in seconds.

    Message j goes to partition j % PARTITIONS of a fresh topic through one
    idempotent producer, so its offset is j // PARTITIONS: no delivery
    callback per message (which alone held the producer under 50,000
    msg/s); the partitions' high watermarks are checked at the end.

    After `base` messages already in the topic (an upsert table's rows),
    message j is the (base + j)-th: half updates of a random key written
    so far, half new keys."""
    import random
    rng = random.Random(f"continuous-{base}")
    next_key = base
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
            if base and rng.random() < 0.5:
                key = rng.randrange(next_key)
            else:
                key, next_key = next_key, next_key + 1
            value = '{"id":%d,"planned":%.6f,"pad":"%s"}' % (key, start + j / rate, pad)
            producer.produce(topic, value=value, key=str(key), partition=(base + j) % PARTITIONS)
        i += tick
        producer.poll(0)
    behind = time.time() - (start + (total - 1) / rate)
    if producer.flush(60) != 0:
        raise RuntimeError("messages still unsent after 60 s")
    consumer = Consumer({"bootstrap.servers": env["TESTBED_KAFKA_BOOTSTRAP"], "group.id": "bench-watermarks"})
    for p in range(PARTITIONS):
        count = len(range(p, base + total, PARTITIONS))
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        if high != count:
            raise RuntimeError(f"partition {p} holds {high} messages, {count} were sent")
    consumer.close()
    return Delivered(base, total, rate, start), behind, start


class Delivered:
    """The timed messages, computed rather than stored (a 10-minute run at
    100,000 msg/s is 60M of them): message j is the (base + j)-th of the
    topic, on partition (base + j) % PARTITIONS at offset
    (base + j) // PARTITIONS, planned at start + j / rate."""

    def __init__(self, base, total, rate, start):
        self.base, self.total, self.rate, self.start = base, total, rate, start

    def count(self):
        return self.total

    def of_partition(self, p):
        """(offset, planned time) of the partition's timed messages, in order."""
        for j in range((p - self.base) % PARTITIONS, self.total, PARTITIONS):
            yield (self.base + j) // PARTITIONS, self.start + j / self.rate

    def next_offsets(self):
        """{partition: the offset after its last timed message}."""
        return {p: (self.base + j) // PARTITIONS + 1
                for p in range(PARTITIONS)
                for j in [max(range((p - self.base) % PARTITIONS, self.total, PARTITIONS), default=-1)]
                if j >= 0}


def latencies(delivered, events, after):
    """The latencies of the messages planned at or after `after`, as a
    histogram of whole milliseconds ({ms: messages}); None if some message
    never became visible."""
    hist = {}
    by_partition = {}
    for seen, p, n in sorted(events):
        by_partition.setdefault(p, []).append((seen, n))
    for p in range(PARTITIONS):
        visible = by_partition.get(p, [])
        k = 0
        for offset, planned in delivered.of_partition(p):
            while k < len(visible) and visible[k][1] <= offset:
                k += 1
            if k == len(visible):
                return None  # not all visible
            if planned >= after:
                ms = round((visible[k][0] - planned) * 1000)
                hist[ms] = hist.get(ms, 0) + 1
    return hist


def quantile(sorted_values, q):
    """The q-quantile of sorted values (nearest rank)."""
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def percentile(hist, q):
    """The q-quantile (ms) of a histogram {ms: count}."""
    n = sum(hist.values())
    rank = min(n - 1, int(round(q * (n - 1))))
    seen = 0
    for ms in sorted(hist):
        seen += hist[ms]
        if seen > rank:
            return ms
    return None


def seconds_of(interval):
    """`2s`, `500ms`, `1m` as seconds."""
    for suffix, scale in (("ms", 0.001), ("s", 1), ("m", 60)):
        if interval.endswith(suffix) and interval[:-len(suffix)].replace(".", "", 1).isdigit():
            return float(interval[:-len(suffix)]) * scale
    raise ValueError(f"commit interval {interval!r}: write e.g. 1s, 500ms or 1m")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--rate", type=int, required=True, help="messages a second")
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--interval", required=True, help="commit_interval, e.g. 1s")
    ap.add_argument("--warmup", type=int, default=10, help="seconds left out of the figures")
    ap.add_argument("--out", required=True, help="JSON result file")
    ap.add_argument("--upsert", type=int, default=0, metavar="BASE",
                    help="an upsert stream on a table of BASE rows (loaded first, not timed)")
    ap.add_argument("--sample-every", type=int, default=0,
                    help="seconds between samples of RSS and the table's state (0: none)")
    ap.add_argument("--peer", action="store_true",
                    help="measure the Kafka Connect Iceberg sink instead of topicberg (append only)")
    ap.add_argument("--maintain", default="",
                    help="[maintain] settings of the job, e.g. 'follow_every = \"1m\"'")
    ap.add_argument("--scheduled", type=int, default=0, metavar="EVERY",
                    help="no follower: `topicberg sync` every EVERY seconds while producing (the baseline)")
    ap.add_argument("--workers", type=int, default=1,
                    help="followers of the job sharing its partitions (default 1)")
    ap.add_argument("--read-times", action="store_true",
                    help="at the end: DuckDB and Spark query times of the table as left, then after "
                         "`topicberg maintain` compacted it")
    args = ap.parse_args()
    if args.scheduled and (args.peer or args.sample_every or args.read_times):
        ap.error("--scheduled measures scheduled syncs' CPU: no --peer, --sample-every or --read-times")
    if args.peer and (args.upsert or args.maintain):
        ap.error("--peer measures an append stream with the sink's own settings: no --upsert or --maintain")
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
        maintain = f"\n[maintain]\n{args.maintain}\n" if args.maintain else ""
        upsert = (f'\n[[streams]]\ntopic = "{topic}"\nmode = "upsert"\ndedup_keys = ["id"]\n'
                  'delete_format = "position"\n') if args.upsert else ""
        f.write(job_text(env, topic, namespace, args.interval, os.path.join(work, "state"), maintain, upsert))
    base_sync = None
    if args.upsert:
        load_base(env, topic, args.upsert)
        t0 = time.time()
        subprocess.run([args.binary, "sync", "-c", job], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        base_sync = {"rows": args.upsert, "seconds": round(time.time() - t0, 1)}
        print(f"base of {args.upsert:,} rows synced in {base_sync['seconds']} s", flush=True)
    report = os.path.join(work, "follow.json")
    log = open(os.path.join(work, "follow.log"), "w")
    if args.peer:
        sys.path.insert(0, os.path.join(repo, "bench"))
        import connect_peer
        port = connect_peer.free_port()
        follower, peer_ns, peer_table, log_path = connect_peer.start_sink(
            env, topic, run_id, commit_ms=round(seconds_of(args.interval) * 1000), rest_port=port)
        connect_peer.wait_running(follower, port, f"iceberg-{run_id}", log_path)
        log.close()
        log = open(log_path)
        poller = PeerPoller(env, peer_ns, peer_table)
    elif args.scheduled:
        return scheduled(args, env, job, namespace, topic, log, base_sync)
    elif args.workers > 1:
        return workers(args, env, job, namespace, topic, work, base_sync)
    else:
        follower = subprocess.Popen([args.binary, "sync", "-c", job, "--follow", "--report-json", report],
                                    stdout=subprocess.DEVNULL, stderr=log, env={**env, "TOPICBERG_LOG": "info"})
        poller = Poller(env, namespace, topic)
    poller.start()
    sampler = (Sampler(env, peer_ns if args.peer else namespace, peer_table if args.peer else topic,
                       follower.pid, args.sample_every, None if args.peer else os.path.join(work, "state"))
               if args.sample_every else None)
    if sampler:
        sampler.start()
    cpu = {}
    timer = threading.Timer(args.warmup, lambda: cpu.update(start=cpu_seconds(follower.pid), at=time.time()))
    timer.start()
    delivered, behind, start = produce(env, topic, args.rate, args.seconds, args.upsert)
    cpu["end"] = cpu_seconds(follower.pid)
    cpu["end_at"] = time.time()
    produced = delivered.count()
    deadline = time.time() + 120
    expected = delivered.next_offsets()
    while time.time() < deadline and any(poller.latest.get(p, 0) < n for p, n in expected.items()):
        time.sleep(0.1)
    poller.stop.set()
    poller.join()
    if sampler:
        sampler.stop.set()
        sampler.join()
    follower.send_signal(signal.SIGTERM)
    code = follower.wait(timeout=120)
    follow_report = None
    if not args.peer:
        with open(report) as f:
            follow_report = json.load(f)
    reads = read_times(env, args.binary, job, namespace, topic) if args.read_times and not args.peer else None
    lat = latencies(delivered, poller.events, start + args.warmup)
    window = args.rate * (cpu["end_at"] - cpu["at"])
    result = {
        "rate": args.rate, "seconds": args.seconds, "commit_interval": args.interval, "warmup_s": args.warmup,
        "upsert_base": base_sync, "peer": "kafka-connect-iceberg-1.10.1" if args.peer else None,
        "messages": produced, "producer_behind_s": round(behind, 3),
        "valid": behind <= 0.01 * args.seconds and lat is not None,
        "latency_ms": None if not lat else {
            "p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99),
            "max": max(lat), "messages": sum(lat.values())},
        "follower_cpu_us_per_msg": round((cpu["end"] - cpu["start"]) * 1e6 / window, 2),
        "follower_exit": code, "follower": follow_report, "polls": poller.polls,
        "samples": sampler.samples if sampler else None,
        "flat": flatness(sampler.samples, round_durations(log.name, sampler.started), args.seconds,
                         sampler.commits)
        if sampler else None,
        "read_times": reads,
        "work_dir": work,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k not in ("follower", "samples")}, indent=1))
    if not result["valid"]:
        sys.exit("bench: the run does not count (producer behind its schedule, or messages never visible)")


def workers(args, env, job, namespace, topic, work, base_sync):
    """--workers N: N followers share the partitions; latency, summed CPU,
    snapshots per minute and conflicts per table."""
    procs = []
    for n in range(args.workers):
        state = os.path.join(work, f"state-{n}")
        log_path = os.path.join(work, f"worker-{n}.log")
        procs.append((subprocess.Popen(
            [args.binary, "sync", "-c", job, "--follow", "--state-dir", state,
             "--report-json", os.path.join(work, f"worker-{n}.json")],
            stdout=subprocess.DEVNULL, stderr=open(log_path, "w"), env={**env, "TOPICBERG_LOG": "info"}),
            log_path))
    deadline = time.time() + 120
    while time.time() < deadline and not all(
            "consumer group assignment changed" in open(path).read() for _, path in procs):
        time.sleep(0.2)
    poller = Poller(env, namespace, topic)
    poller.start()
    cpu = {}
    each = lambda: [cpu_seconds(p.pid) for p, _ in procs]
    timer = threading.Timer(args.warmup, lambda: cpu.update(start=each(), at=time.time()))
    timer.start()
    began = time.time()
    delivered, behind, start = produce(env, topic, args.rate, args.seconds, args.upsert)
    cpu["end"], cpu["end_at"] = each(), time.time()
    expected = delivered.next_offsets()
    deadline = time.time() + 120
    while time.time() < deadline and any(poller.latest.get(p, 0) < n for p, n in expected.items()):
        time.sleep(0.1)
    minutes = (time.time() - began) / 60
    poller.stop.set()
    poller.join()
    reports = []
    for n, (p, _) in enumerate(procs):
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        with open(os.path.join(work, f"worker-{n}.json")) as f:
            reports.append(json.load(f))
    tables = {}
    for r in reports:
        for t in r.get("tables", []):
            name = t["table"]
            s = tables.setdefault(name, {"snapshots": 0, "commit_retries": 0, "superseded": 0, "handed": 0,
                                          "records": 0, "committing_workers": 0})
            for key in ("snapshots", "commit_retries", "superseded", "handed", "records"):
                s[key] += t.get(key, 0)
            s["committing_workers"] += 1 if t.get("snapshots", 0) else 0
    for s in tables.values():
        s["snapshots_per_minute"] = round(s["snapshots"] / minutes, 1)
    lat = latencies(delivered, poller.events, start + args.warmup)
    window = args.rate * (cpu["end_at"] - cpu["at"])
    result = {
        "rate": args.rate, "seconds": args.seconds, "commit_interval": args.interval, "warmup_s": args.warmup,
        "upsert_base": base_sync, "workers": args.workers, "messages": delivered.count(),
        "producer_behind_s": round(behind, 3), "valid": behind <= 0.01 * args.seconds and lat is not None,
        "latency_ms": None if not lat else {
            "p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99), "max": max(lat)},
        "follower_cpu_us_per_msg": round((sum(cpu["end"]) - sum(cpu["start"])) * 1e6 / window, 2),
        "worker_cpu_us_per_msg": [{"cpu_us_per_msg": round((e - s) * 1e6 / window, 2),
                                   "snapshots": sum(t.get("snapshots", 0) for t in r.get("tables", [])),
                                   "handed": sum(t.get("handed", 0) for t in r.get("tables", []))}
                                  for s, e, r in zip(cpu["start"], cpu["end"], reports)],
        "minutes": round(minutes, 2), "tables": tables, "work_dir": work,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    if not result["valid"]:
        sys.exit("bench: the run does not count (producer behind its schedule, or messages never visible)")


def scheduled(args, env, job, namespace, topic, log, base_sync):
    """The --scheduled run: syncs every EVERY seconds beside the producer,
    then one more; CPU per message over every message produced."""
    syncs = Scheduled(args.binary, job, args.scheduled, log)
    poller = Poller(env, namespace, topic)
    syncs.start()
    poller.start()
    delivered, behind, start = produce(env, topic, args.rate, args.seconds, args.upsert)
    syncs.stop.set()
    syncs.join()
    produced = delivered.count()
    expected = delivered.next_offsets()
    deadline = time.time() + 30
    while time.time() < deadline and any(poller.latest.get(p, 0) < n for p, n in expected.items()):
        time.sleep(0.1)
    poller.stop.set()
    poller.join()
    lat = latencies(delivered, poller.events, start + args.warmup)
    failed = [r for r in syncs.runs if r[3] != 0]
    result = {
        "rate": args.rate, "seconds": args.seconds, "scheduled_every_s": args.scheduled,
        "upsert_base": base_sync, "messages": produced, "producer_behind_s": round(behind, 3),
        "valid": behind <= 0.01 * args.seconds and lat is not None and not failed,
        "latency_ms": None if not lat else {
            "p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99),
            "max": max(lat), "messages": sum(lat.values())},
        "syncs_cpu_us_per_msg": round(syncs.cpu() * 1e6 / max(produced, 1), 3),
        "syncs": [{"started": round(r[0], 1), "wall_s": round(r[1], 2), "cpu_s": round(r[2], 2), "exit": r[3]}
                  for r in syncs.runs],
        "work_dir": os.path.dirname(job),
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "syncs"}, indent=1))
    if not result["valid"]:
        sys.exit("bench: the run does not count (producer behind, a sync failed, or messages never visible)")


def read_times(env, binary, job, namespace, table):
    """DuckDB and Spark query times (bench/read_times.py) of the table as
    the follower left it, then after `topicberg maintain` (the job's
    settings: small files compacted to the target size, delete files
    applied) compacted it."""
    def times():
        out = subprocess.run([env["TESTBED_PYTHON"], os.path.join(os.path.dirname(__file__), "read_times.py"),
                              namespace, table, "1"], check=True, capture_output=True, text=True,
                             env={**os.environ, **env})
        return json.loads(out.stdout.strip().splitlines()[-1])
    as_left = times()
    report = os.path.join(os.path.dirname(job), "maintain.json")
    t0 = time.time()
    subprocess.run([binary, "maintain", "-c", job, "--report-json", report], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    maintain_s = round(time.time() - t0, 1)
    with open(report) as f:
        compaction = [t.get("compaction") for t in json.load(f).get("tables", [])]
    return {"as_left": as_left, "maintain_s": maintain_s, "compaction": compaction, "compacted": times()}


if __name__ == "__main__":
    main()
