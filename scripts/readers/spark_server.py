#!/usr/bin/env python3
"""One Spark session that serves the test bed's Spark reads.

Starting PySpark (a JVM, the Iceberg jars, a session) costs about ten seconds
of two cores per read; the integration tests read with Spark a few hundred
times. spark_reader.py sends each read here instead when it can: this
process keeps one session and registers a catalog per distinct catalog
configuration (named after a hash of it, so a read never sees another's
settings), reads, and answers with the canonical lines or the reader error.

Protocol (Unix socket $TB_RUN/spark_reader.sock): the client sends one JSON
line {"cfg": CatalogConfig fields, "table": [namespace..., name]} and reads
one JSON line back: {"lines": [base64...]} or {"error": text, "code": n}.

Started on demand by spark_reader.py (`start_server`), detached, with its pid
in $TB_RUN/spark_reader.pid (so `scripts/testbed down` stops it) and its log
in $TB_RUN/spark_reader.log. It exits by itself after IDLE_SECONDS without a
request. Reads of the embedded catalog's tables on Azure/GCS need other
jars: spark_reader.py runs those in its own session, as before.
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import spark_reader  # noqa: E402
from common import ReaderError  # noqa: E402

IDLE_SECONDS = 1200
START_SECONDS = 180


def run_dir() -> str:
    return os.environ.get("TB_RUN") or os.path.join(HERE, "..", "..", ".testbed")


def socket_path() -> str:
    return os.path.join(run_dir(), "spark_reader.sock")


# --- client side -------------------------------------------------------------

def request(cfg: common.CatalogConfig, table: common.TableName) -> tuple[list[bytes], None] | tuple[None, ReaderError]:
    """Reads through the server, starting it when none runs. Raises OSError
    when no server can be reached (the caller then reads in-process)."""
    sock = connect() or start_server()
    with sock:
        sock.settimeout(None)
        msg = {"cfg": dataclasses.asdict(cfg), "table": list(table.namespace) + [table.name]}
        sock.sendall(json.dumps(msg).encode() + b"\n")
        answer = json.loads(read_line(sock))
    if "error" in answer:
        return None, ReaderError(answer["error"], answer["code"])
    return [base64.b64decode(x) for x in answer["lines"]], None


def read_line(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise OSError("the Spark reader server closed the connection")
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


def connect() -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(socket_path())
        return s
    except OSError:
        s.close()
        return None


def start_server() -> socket.socket:
    """Starts the server (one process, whoever takes the lock first) and
    waits until it accepts."""
    os.makedirs(run_dir(), exist_ok=True)
    with open(os.path.join(run_dir(), "spark_reader.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = connect()
        if sock:
            return sock
        log = open(os.path.join(run_dir(), "spark_reader.log"), "ab")
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, env=dict(os.environ))
        with open(os.path.join(run_dir(), "spark_reader.pid"), "w") as f:
            f.write(str(proc.pid))
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise OSError(f"the Spark reader server exited ({proc.returncode}); "
                              f"see {run_dir()}/spark_reader.log")
            sock = connect()
            if sock:
                return sock
            time.sleep(0.2)
        raise OSError("the Spark reader server did not start within "
                      f"{START_SECONDS} s; see {run_dir()}/spark_reader.log")


# --- server side -------------------------------------------------------------

class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, spark):
        self.spark = spark
        self.catalogs: dict[str, str] = {}
        self.lock = threading.Lock()
        self.last_request = time.monotonic()
        super().__init__(socket_path(), Handler)

    def catalog_for(self, cfg: common.CatalogConfig) -> str:
        """The session's catalog with `cfg`'s settings, registered once."""
        conf = spark_reader.catalog_conf(cfg, "tb")
        key = json.dumps(sorted(conf.items()))
        with self.lock:
            name = self.catalogs.get(key)
            if name is None:
                name = f"tb{len(self.catalogs)}"
                for k, v in spark_reader.catalog_conf(cfg, name).items():
                    self.spark.conf.set(k, v)
                self.catalogs[key] = name
            return name


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: Server = self.server  # type: ignore[assignment]
        server.last_request = time.monotonic()
        msg = json.loads(self.rfile.readline())
        cfg = common.CatalogConfig(**msg["cfg"])
        table = common.TableName(tuple(msg["table"][:-1]), msg["table"][-1])
        # Each request runs in a thread of its own, whose JVM thread has no
        # active session: Iceberg's path loads (the embedded catalog's tables)
        # then find no `default_iceberg` catalog. Make ours the active one.
        spark = server.spark
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        try:
            catalog = None if cfg.catalog == "sql" else server.catalog_for(cfg)
            columns, rows = spark_reader.read_with(server.spark, cfg, table, catalog)
            lines = common.serialize_rows(columns, rows)
            answer = {"lines": [base64.b64encode(x).decode() for x in lines]}
        except ReaderError as e:
            answer = {"error": str(e), "code": e.code}
        except Exception as e:  # noqa: BLE001 - reported to the client, server stays up
            answer = {"error": f"{type(e).__name__}: {e}", "code": common.EXIT_FAILURE}
        self.wfile.write(json.dumps(answer).encode() + b"\n")
        server.last_request = time.monotonic()


def serve() -> None:
    # One session for every read of a test run: more memory than a one-shot
    # read's session.
    spark = spark_reader.session(None, {"spark.driver.memory": "2g"})
    if os.path.exists(socket_path()):
        os.unlink(socket_path())
    server = Server(spark)

    def idle_exit() -> None:
        while time.monotonic() - server.last_request < IDLE_SECONDS:
            time.sleep(10)
        server.shutdown()

    threading.Thread(target=idle_exit, daemon=True).start()
    print(f"spark reader server listening on {socket_path()}", flush=True)
    try:
        server.serve_forever()
    finally:
        os.unlink(socket_path())
        spark.stop()


if __name__ == "__main__":
    serve()
