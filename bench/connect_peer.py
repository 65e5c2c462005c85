"""The peer in bench/run: the Apache Iceberg Kafka Connect sink 1.10.1 in
Kafka Connect standalone (4.3.1), appending the same topic into the same
REST catalog and S3 store as topicberg.

The worker starts with the sink; the step ends when the table's current
snapshot holds every message of the topic (`total-records`), read from the
catalog every 0.25 s. Wall time runs from the worker's start (JVM and
Connect start-up included, as a scheduled run of it would pay); CPU time
(user + system) and peak RSS are the worker's, read from /proc at that
moment, before it is stopped. The sink commits every second
(`iceberg.control.commit.interval-ms=1000`, default 5 minutes), its
fastest useful setting here.
"""

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(REPO, "bench", "connect")
# Stop waiting for the sink after this long (it is far slower than topicberg).
TIMEOUT_S = 3600


class Catalog:
    """The REST catalog's token, namespaces and table summaries."""

    def __init__(self, env):
        self.uri = env["TESTBED_FIXTURE_URI"].rstrip("/")
        client_id, secret = env["TESTBED_FIXTURE_CREDENTIAL"].split(":", 1)
        body = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                                       "client_secret": secret, "scope": "catalog"}).encode()
        with urllib.request.urlopen(f"{self.uri}/v1/oauth/tokens", body) as r:
            self.token = json.load(r)["access_token"]

    def _request(self, method, path, body=None):
        req = urllib.request.Request(f"{self.uri}/v1{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            text = r.read()
            return json.loads(text) if text else None

    def create_namespace(self, namespace):
        self._request("POST", "/namespaces", {"namespace": [namespace], "properties": {}})

    def drop_namespaces(self, prefix):
        """Drops every namespace named `prefix...` with its tables, asking the
        catalog to purge their files too; the namespaces dropped."""
        dropped = []
        for (namespace, *_) in self._request("GET", "/namespaces")["namespaces"]:
            if not namespace.startswith(prefix):
                continue
            for ident in self._request("GET", f"/namespaces/{namespace}/tables")["identifiers"]:
                self._request("DELETE", f"/namespaces/{namespace}/tables/{ident['name']}?purgeRequested=true")
            self._request("DELETE", f"/namespaces/{namespace}")
            dropped.append(namespace)
        return dropped

    def total_records(self, namespace, table):
        try:
            meta = self._request("GET", f"/namespaces/{namespace}/tables/{table}")["metadata"]
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        current = meta.get("current-snapshot-id")
        for snap in meta.get("snapshots", []):
            if snap["snapshot-id"] == current:
                return int(snap["summary"].get("total-records", 0))
        return 0


def proc_usage(pid):
    """CPU seconds (user + system) and peak RSS (MiB) of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024
    return cpu, rss


def properties(path, values):
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in values.items())
    return path


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sink(env, topic, run_id, commit_ms=1000, rest_port=0):
    """Starts Kafka Connect standalone with the sink on `topic`, committing
    every `commit_ms`; (process, namespace, table, log path)."""
    home = subprocess.run([os.path.join(HERE, "setup")], check=True, capture_output=True,
                          text=True).stdout.split()[-1]
    namespace, table = f"bench_{run_id}_connect", topic.lower()
    control = f"bench_control_{run_id}"
    subprocess.run([os.path.join(REPO, "scripts/testbed"), "create-topic", control, "1"], check=True,
                   stdout=subprocess.DEVNULL)
    Catalog(env).create_namespace(namespace)
    work = tempfile.mkdtemp(prefix=f"topicberg-bench-connect-{run_id}-")
    worker = properties(os.path.join(work, "worker.properties"), {
        "bootstrap.servers": env["TESTBED_KAFKA_BOOTSTRAP"],
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "offset.storage.file.filename": os.path.join(work, "offsets"),
        "plugin.path": os.path.join(home, "plugins"),
        "listeners": f"http://127.0.0.1:{rest_port}",
        "connector.client.config.override.policy": "All",
    })
    sink = properties(os.path.join(work, "sink.properties"), {
        "name": f"iceberg-{run_id}",
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "tasks.max": "2",
        "topics": topic,
        "consumer.override.auto.offset.reset": "earliest",
        "iceberg.tables": f"{namespace}.{table}",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.topic": control,
        "iceberg.control.commit.interval-ms": str(commit_ms),
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": env["TESTBED_FIXTURE_URI"],
        "iceberg.catalog.credential": env["TESTBED_FIXTURE_CREDENTIAL"],
        "iceberg.catalog.warehouse": env["TESTBED_FIXTURE_WAREHOUSE"],
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "iceberg.catalog.s3.endpoint": env["TESTBED_S3_ENDPOINT"],
        "iceberg.catalog.s3.path-style-access": "true",
        "iceberg.catalog.s3.access-key-id": env["TESTBED_S3_ACCESS_KEY"],
        "iceberg.catalog.s3.secret-access-key": env["TESTBED_S3_SECRET_KEY"],
        "iceberg.catalog.client.region": env["TESTBED_S3_REGION"],
    })
    log_path = os.path.join(work, "connect.log")
    argv = ["java", f"-Dlog4j2.configurationFile={os.path.join(HERE, 'log4j2.properties')}",
            "-cp", os.path.join(home, "lib", "*"), "org.apache.kafka.connect.cli.ConnectStandalone",
            worker, sink]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    return proc, namespace, table, log_path


def wait_running(proc, port, name, log_path, timeout=180):
    """Waits until the worker's REST API says every task of `name` runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Kafka Connect exited {proc.returncode}: {tail(log_path)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/connectors/{name}/status", timeout=2) as r:
                tasks = json.load(r).get("tasks", [])
            if tasks and all(t.get("state") == "RUNNING" for t in tasks):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the sink's tasks were not running after {timeout} s: {tail(log_path)}")


def run_sink(env, topic, messages, run_id):
    """Runs the sink on `topic` until its table holds `messages` rows."""
    proc, namespace, table, log_path = start_sink(env, topic, run_id)
    started = time.monotonic()
    catalog = Catalog(env)
    try:
        rows = None
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"Kafka Connect exited {proc.returncode}: {tail(log_path)}")
            if time.monotonic() - started > TIMEOUT_S:
                raise RuntimeError(f"the sink held {rows} of {messages} rows after {TIMEOUT_S} s")
            rows = catalog.total_records(namespace, table)
            if rows is not None and rows >= messages:
                wall = time.monotonic() - started
                cpu, rss = proc_usage(proc.pid)
                return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_mib": round(rss, 1),
                        "messages": rows}
            time.sleep(0.25)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def tail(path, n=4000):
    with open(path, errors="replace") as f:
        return f.read()[-n:]
