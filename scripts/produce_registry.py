#!/usr/bin/env python3
"""Produce Kafka records the way real Confluent producers do: Avro or Protobuf
values (and keys) through a schema registry, with confluent-kafka's own
AvroSerializer / ProtobufSerializer, so the bytes on the topic are exactly the
Confluent wire format (magic byte 0, 4-byte big-endian schema id, and for
Protobuf the message-index array, then the body).

  produce_registry.py [--bootstrap B] [--registry URL] --topic T
      --value-format avro|protobuf|json [--value-schema FILE] [--message NAME]
      [--key-format string|json|avro|protobuf|none] [--key-schema FILE] [--key-message NAME]
      [--compatibility LEVEL] [--partition-by-key] [--raw] [-X prop=value ...] < records.jsonl

Run it with the test bed's Python ($TESTBED_PYTHON). --bootstrap defaults to
$TESTBED_KAFKA_BOOTSTRAP, --registry to $TESTBED_SCHEMA_REGISTRY_URL.

Input: one JSON object per stdin line (blank lines skipped):
  {"key": <JSON or null>, "value": <JSON object or null>, "partition": <int, optional>}
A null (or absent) value is a tombstone (no value bytes). A null key is no key.

Subjects follow TopicNameStrategy (<topic>-value, <topic>-key); schemas are
registered automatically (auto.register.schemas, the client's default).
--compatibility NONE|BACKWARD|FORWARD|FULL|..._TRANSITIVE first sets that level
on the subjects this run registers in (PUT /config/<subject>): NONE lets a test
register a change the registry would refuse (long -> string, Avro -> Protobuf).

Value formats:
  avro      --value-schema is an Avro schema (.avsc JSON). The JSON value is
            converted by the schema: decimal from a string ("12.30") or number;
            timestamp-millis/-micros from ISO-8601 text (aware; no zone = UTC);
            local-timestamp-millis/-micros from ISO-8601 text without a zone
            (naive); date "YYYY-MM-DD"; time-millis/-micros "HH:MM:SS[.ffffff]";
            uuid from its text; bytes/fixed (and fixed uuid) from standard
            base64; float/double also from "NaN"/"Infinity"/"-Infinity";
            integers pass as they are for every int/long logical type (epoch
            units); records/arrays/maps recursively; enums by symbol. Unions:
            null or a value; with several non-null branches the value may be
            wrapped Avro-JSON style, {"<branch type name>": value}, to pick the
            branch, else the first branch that accepts the value is used.
  protobuf  --value-schema is a .proto file (proto3; may import well-known
            types such as google/protobuf/timestamp.proto, and other .proto
            files from its folder or --proto-path DIRs). It is compiled at run
            time with grpcio-tools' protoc into a temp dir; the message is the
            first one in the file unless --message NAME (a nested one as
            Outer.Inner). JSON -> message by google.protobuf.json_format.ParseDict
            (proto3 JSON mapping: Timestamp as RFC 3339 text, bytes as base64,
            64-bit integers as numbers or strings, enums by name).
  json      plain JSON text (compact), no registry, no framing.
  --raw     each line's value is a base64 string written as is (a non-framed
            message, a truncated body, an unknown schema id, ...); no registry
            for values. Keys still follow --key-format.

Key formats: string (default: a JSON string as its UTF-8 text, anything else as
its compact JSON text), json (compact JSON text), avro / protobuf (like values,
with --key-schema / --key-message, subject <topic>-key), none (no key).

Partitions: a line's "partition" wins. Otherwise, with --partition-by-key, the
key bytes pick the partition with murmur2 (partitioner murmur2_random, the Java
client's default partitioner; null keys: random); without it, partition 0.

Output: one JSON line on stdout, e.g.
  {"value_schema_id": 3, "key_schema_id": 4, "count": 10}
(ids as written in the framing of the produced records; null when none was
used). Exit 1 on any serialization or delivery error (after flushing), 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import importlib
import importlib.resources
import json
import math
import os
import sys
import tempfile
import uuid
from typing import Any, Callable, Optional

UTC = dt.timezone.utc


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------
# JSON -> Avro (Python values for fastavro, driven by the schema)
# ---------------------------------------------------------------------------

AVRO_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _b64(v: Any, what: str) -> bytes:
    if not isinstance(v, str):
        raise ValueError(f"{what}: expected a base64 string, got {type(v).__name__}")
    return base64.b64decode(v, validate=True)


def _iso_datetime(v: str, what: str) -> dt.datetime:
    s = v.strip()
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    try:
        return dt.datetime.fromisoformat(s)
    except ValueError as e:
        raise ValueError(f"{what}: not an ISO-8601 timestamp: {v!r} ({e})") from None


class AvroJson:
    """Converts JSON values to the Python values fastavro writes for a schema."""

    def __init__(self, schema: Any):
        self.schema = schema
        self.named: dict[str, Any] = {}
        self._collect(schema, None)

    # Named types (records, enums, fixed) by full name, so references resolve.
    def _fullname(self, s: dict, ns: Optional[str]) -> tuple[str, Optional[str]]:
        name = s["name"]
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        ns = s.get("namespace", ns)
        return (f"{ns}.{name}" if ns else name), ns

    def _collect(self, s: Any, ns: Optional[str]) -> None:
        if isinstance(s, list):
            for b in s:
                self._collect(b, ns)
        elif isinstance(s, dict):
            t = s.get("type")
            if t in ("record", "error", "enum", "fixed"):
                full, ns2 = self._fullname(s, ns)
                self.named[full] = (s, ns2)
                if t in ("record", "error"):
                    for f in s.get("fields", []):
                        self._collect(f["type"], ns2)
            elif t == "array":
                self._collect(s["items"], ns)
            elif t == "map":
                self._collect(s["values"], ns)
            elif isinstance(t, (dict, list)):
                self._collect(t, ns)

    def _resolve(self, name: str, ns: Optional[str]) -> tuple[Any, Optional[str]]:
        for cand in ((f"{ns}.{name}" if ns and "." not in name else None), name):
            if cand and cand in self.named:
                return self.named[cand]
        raise ValueError(f"unknown Avro type name {name!r}")

    def _branch_name(self, s: Any, ns: Optional[str]) -> str:
        """The name a union branch has in Avro JSON / fastavro tuple notation."""
        if isinstance(s, str):
            if s in AVRO_PRIMITIVES:
                return s
            return self._fullname(self._resolve(s, ns)[0], None)[0]
        if isinstance(s, dict):
            t = s.get("type")
            if t in ("record", "error", "enum", "fixed"):
                return self._fullname(s, ns)[0]
            if isinstance(t, str) and t not in ("array", "map"):
                return self._branch_name(t, ns)
            return t
        raise ValueError(f"bad union branch {s!r}")

    def convert(self, v: Any, s: Any = None, ns: Optional[str] = None, path: str = "$") -> Any:
        if s is None:
            s = self.schema
        if isinstance(s, list):
            return self._union(v, s, ns, path)
        if isinstance(s, str):
            if s in AVRO_PRIMITIVES:
                return self._primitive(v, s, path)
            named, ns2 = self._resolve(s, ns)
            return self.convert(v, named, ns2, path)
        if not isinstance(s, dict):
            raise ValueError(f"{path}: bad schema {s!r}")
        t = s.get("type")
        logical = s.get("logicalType")
        if logical is not None:
            return self._logical(v, s, logical, path)
        if t in ("record", "error"):
            if not isinstance(v, dict):
                raise ValueError(f"{path}: expected an object for record {s.get('name')}")
            _, ns2 = self._fullname(s, ns)
            known = {f["name"] for f in s["fields"]}
            extra = set(v) - known
            if extra:
                raise ValueError(f"{path}: fields not in record {s.get('name')}: {sorted(extra)}")
            out = {}
            for f in s["fields"]:
                if f["name"] in v:
                    out[f["name"]] = self.convert(v[f["name"]], f["type"], ns2,
                                                  f"{path}.{f['name']}")
                # absent: fastavro writes the field's default (or fails without one)
            return out
        if t == "enum":
            if v not in s["symbols"]:
                raise ValueError(f"{path}: {v!r} is not a symbol of enum {s.get('name')}")
            return v
        if t == "fixed":
            b = _b64(v, path)
            if len(b) != s["size"]:
                raise ValueError(f"{path}: fixed {s.get('name')} needs {s['size']} bytes, got {len(b)}")
            return b
        if t == "array":
            if not isinstance(v, list):
                raise ValueError(f"{path}: expected an array")
            return [self.convert(x, s["items"], ns, f"{path}[{i}]") for i, x in enumerate(v)]
        if t == "map":
            if not isinstance(v, dict):
                raise ValueError(f"{path}: expected an object for a map")
            return {k: self.convert(x, s["values"], ns, f"{path}.{k}") for k, x in v.items()}
        if isinstance(t, (str, list, dict)):
            return self.convert(v, t, ns, path)
        raise ValueError(f"{path}: bad schema {s!r}")

    def _primitive(self, v: Any, t: str, path: str) -> Any:
        if t == "null":
            if v is not None:
                raise ValueError(f"{path}: expected null")
            return None
        if v is None:
            raise ValueError(f"{path}: null for non-nullable {t}")
        if t == "boolean":
            if not isinstance(v, bool):
                raise ValueError(f"{path}: expected true/false")
            return v
        if t in ("int", "long"):
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, str) and v.lstrip("-").isdigit():
                    return int(v)
                raise ValueError(f"{path}: expected an integer for {t}, got {v!r}")
            return v
        if t in ("float", "double"):
            if isinstance(v, str):
                special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
                if v in special:
                    return special[v]
                raise ValueError(f"{path}: expected a number, got {v!r}")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{path}: expected a number, got {v!r}")
            return float(v)
        if t == "bytes":
            return _b64(v, path)
        if t == "string":
            if not isinstance(v, str):
                raise ValueError(f"{path}: expected a string, got {v!r}")
            return v
        raise ValueError(f"{path}: unknown type {t}")

    def _logical(self, v: Any, s: dict, logical: str, path: str) -> Any:
        base = s["type"]
        if v is None:
            raise ValueError(f"{path}: null for non-nullable {logical}")
        if logical == "decimal":
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise ValueError(f"{path}: decimal needs a string or number, got {v!r}")
            try:
                d = decimal.Decimal(str(v))
            except decimal.InvalidOperation:
                raise ValueError(f"{path}: not a decimal: {v!r}") from None
            if not d.is_finite():
                raise ValueError(f"{path}: not a finite decimal: {v!r}")
            return d
        if isinstance(v, int) and not isinstance(v, bool) and base in ("int", "long"):
            return v  # epoch days / millis / micros / nanos as they are
        if logical in ("timestamp-millis", "timestamp-micros", "timestamp-nanos"):
            if not isinstance(v, str):
                raise ValueError(f"{path}: {logical} needs ISO-8601 text or an integer")
            d = _iso_datetime(v, path)
            return d if d.tzinfo is not None else d.replace(tzinfo=UTC)
        if logical in ("local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos"):
            if not isinstance(v, str):
                raise ValueError(f"{path}: {logical} needs ISO-8601 text or an integer")
            d = _iso_datetime(v, path)
            if d.tzinfo is not None:
                raise ValueError(f"{path}: {logical} takes a timestamp without a zone, got {v!r}")
            return d
        if logical == "date":
            if not isinstance(v, str):
                raise ValueError(f"{path}: date needs 'YYYY-MM-DD' or an integer")
            return dt.date.fromisoformat(v)
        if logical in ("time-millis", "time-micros"):
            if not isinstance(v, str):
                raise ValueError(f"{path}: {logical} needs 'HH:MM:SS[.ffffff]' or an integer")
            return dt.time.fromisoformat(v)
        if logical == "uuid":
            u = uuid.UUID(v) if isinstance(v, str) else None
            if u is None:
                raise ValueError(f"{path}: uuid needs its text form")
            if base == "fixed" or (isinstance(base, str) and base not in AVRO_PRIMITIVES):
                return u.bytes  # fixed(16) uuid (Avro 1.12): the 16 bytes
            return str(u)
        # Any other logical type: written as its underlying type.
        return self.convert(v, {k: x for k, x in s.items() if k != "logicalType"}, None, path)

    def _union(self, v: Any, branches: list, ns: Optional[str], path: str) -> Any:
        names = [self._branch_name(b, ns) for b in branches]
        if v is None:
            if "null" in names:
                return None
            raise ValueError(f"{path}: null for a union without null")
        non_null = [(n, b) for n, b in zip(names, branches) if n != "null"]

        def short(n: str) -> str:
            return n.rsplit(".", 1)[-1]

        # Avro JSON encoding: {"<branch name>": value}
        if isinstance(v, dict) and len(v) == 1:
            (k, inner), = v.items()
            for n, b in non_null:
                if k in (n, short(n)):
                    kind = b.get("type") if isinstance(b, dict) else b
                    if len(non_null) > 1 or kind not in ("record", "map") and not (
                            isinstance(kind, str) and kind in self.named):
                        conv = self.convert(inner, b, ns, path)
                        return (n, conv) if len(non_null) > 1 else conv
        if len(non_null) == 1:
            return self.convert(v, non_null[0][1], ns, path)
        errors = []
        for n, b in non_null:
            try:
                return (n, self.convert(v, b, ns, path))
            except (ValueError, TypeError) as e:
                errors.append(f"{n}: {e}")
        raise ValueError(f"{path}: no union branch accepts {v!r} ({'; '.join(errors)})")


# ---------------------------------------------------------------------------
# Protobuf: compile a .proto at run time, find the message class
# ---------------------------------------------------------------------------

_compiled_dirs: list[str] = []


def compile_proto(path: str, proto_paths: list[str], message: Optional[str]):
    """Compile `path` (and the local .proto files it imports) with grpcio-tools'
    protoc into a temp dir, import the module and return the message class."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise UsageError(f"no such .proto file: {path}")
    wkt = str(importlib.resources.files("grpc_tools") / "_proto")
    includes = [os.path.dirname(path)] + [os.path.abspath(p) for p in proto_paths]
    rel = os.path.basename(path)
    out = tempfile.mkdtemp(prefix="produce_registry_proto_")
    _compiled_dirs.append(out)
    inc_args = [f"-I{d}" for d in includes] + [f"-I{wkt}"]
    desc_set = os.path.join(out, "set.pb")
    if protoc.main(["protoc", *inc_args, "--include_imports",
                    f"--descriptor_set_out={desc_set}", rel]) != 0:
        raise UsageError(f"protoc could not compile {path} (its messages are above)")
    fds = descriptor_pb2.FileDescriptorSet()
    with open(desc_set, "rb") as f:
        fds.ParseFromString(f.read())
    local = [fd.name for fd in fds.file if not fd.name.startswith("google/protobuf/")]
    if protoc.main(["protoc", *inc_args, f"--python_out={out}", *local]) != 0:
        raise UsageError(f"protoc could not generate Python for {path}")
    main_fd = next(fd for fd in fds.file if fd.name == rel)
    if not main_fd.message_type:
        raise UsageError(f"{path} declares no message")
    name = message or main_fd.message_type[0].name
    if main_fd.syntax not in ("proto3", "editions") and main_fd.syntax:
        sys.stderr.write(f"produce_registry: note: {path} is {main_fd.syntax}\n")
    sys.path.insert(0, out)
    mod_name = rel[: -len(".proto")].replace("/", ".").replace("-", "_") + "_pb2"
    mod = importlib.import_module(mod_name)
    obj: Any = mod
    try:
        for part in name.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise UsageError(f"{path}: no message {name!r} (messages: "
                         f"{[m.name for m in main_fd.message_type]})") from None
    return obj


# ---------------------------------------------------------------------------
# Serializers per format
# ---------------------------------------------------------------------------

def make_serializer(fmt: str, schema_file: Optional[str], message: Optional[str],
                    registry_client: Callable[[], Any], proto_paths: list[str],
                    field: str) -> Callable[[Any, Any], Optional[bytes]]:
    """A function (json_value, ctx) -> bytes for one format."""
    if fmt == "none":
        return lambda v, ctx: None
    if fmt == "string":
        return lambda v, ctx: None if v is None else (
            v if isinstance(v, str) else json.dumps(v, separators=(",", ":"),
                                                    ensure_ascii=False)).encode("utf-8")
    if fmt == "json":
        return lambda v, ctx: None if v is None else json.dumps(
            v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if fmt == "raw":
        return lambda v, ctx: None if v is None else _b64(v, f"{field} (--raw)")
    if not schema_file:
        raise UsageError(f"--{field}-format {fmt} needs --{field}-schema FILE")
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        with open(schema_file, encoding="utf-8") as f:
            schema_str = f.read()
        try:
            conv = AvroJson(json.loads(schema_str))
        except json.JSONDecodeError as e:
            raise UsageError(f"{schema_file} is not a JSON Avro schema: {e}") from None
        ser = AvroSerializer(registry_client(), schema_str)
        return lambda v, ctx: None if v is None else ser(conv.convert(v), ctx)
    if fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf import json_format

        cls = compile_proto(schema_file, proto_paths, message)
        ser = ProtobufSerializer(cls, registry_client())
        return lambda v, ctx: None if v is None else ser(json_format.ParseDict(v, cls()), ctx)
    raise UsageError(f"unknown {field} format {fmt!r}")


def schema_id_of(framed: Optional[bytes]) -> Optional[int]:
    if framed is None or len(framed) < 5 or framed[0] != 0:
        return None
    return int.from_bytes(framed[1:5], "big")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="produce_registry.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", default=os.environ.get("TESTBED_KAFKA_BOOTSTRAP"))
    p.add_argument("--registry", default=os.environ.get("TESTBED_SCHEMA_REGISTRY_URL"))
    p.add_argument("--registry-auth", metavar="USER:PASSWORD",
                   help="basic auth for the registry (basic.auth.user.info)")
    p.add_argument("--topic", required=True)
    p.add_argument("--value-format", choices=("avro", "protobuf", "json"))
    p.add_argument("--value-schema")
    p.add_argument("--message", help="Protobuf value message (default: the first in the file)")
    p.add_argument("--key-format", choices=("string", "json", "avro", "protobuf", "none"),
                   default="string")
    p.add_argument("--key-schema")
    p.add_argument("--key-message", help="Protobuf key message (default: the first in the file)")
    p.add_argument("--proto-path", action="append", default=[],
                   help="extra import folder for .proto files (repeatable)")
    p.add_argument("--compatibility", metavar="LEVEL",
                   help="set this compatibility level on the subjects first")
    p.add_argument("--partition-by-key", action="store_true")
    p.add_argument("--raw", action="store_true",
                   help="values are base64 strings written as they are")
    p.add_argument("-X", dest="extra", action="append", default=[], metavar="PROP=VALUE",
                   help="extra librdkafka producer property (repeatable)")
    args = p.parse_args(argv)

    if not args.bootstrap:
        p.error("no --bootstrap (and TESTBED_KAFKA_BOOTSTRAP is not set)")
    if args.raw:
        value_format = "raw"
    elif args.value_format:
        value_format = args.value_format
    else:
        p.error("--value-format is required (or --raw)")

    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = None

    def registry_client():
        nonlocal client
        if client is None:
            if not args.registry:
                raise UsageError("no --registry (and TESTBED_SCHEMA_REGISTRY_URL is not set)")
            from confluent_kafka.schema_registry import SchemaRegistryClient

            conf = {"url": args.registry}
            if args.registry_auth:
                conf["basic.auth.user.info"] = args.registry_auth
            client = SchemaRegistryClient(conf)
        return client

    try:
        value_ser = make_serializer(value_format, args.value_schema, args.message,
                                    registry_client, args.proto_path, "value")
        key_ser = make_serializer(args.key_format, args.key_schema, args.key_message,
                                  registry_client, args.proto_path, "key")
    except (UsageError, OSError) as e:
        sys.stderr.write(f"produce_registry: error: {e}\n")
        return 2

    if args.compatibility:
        subjects = [f"{args.topic}-{field}" for field, fmt in
                    (("value", value_format), ("key", args.key_format))
                    if fmt in ("avro", "protobuf")]
        try:
            for subject in subjects:
                registry_client().set_compatibility(subject_name=subject,
                                                    level=args.compatibility.upper())
        except Exception as e:  # noqa: BLE001
            sys.stderr.write(f"produce_registry: error: setting compatibility "
                             f"{args.compatibility} on {subjects}: {e}\n")
            return 1

    # log_level 3: librdkafka's errors only (not its transient-retry warnings);
    # delivery failures are reported below anyway. -X log_level=7 for debugging.
    conf = {"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
            "linger.ms": 20, "message.timeout.ms": 60000, "log_level": 3}
    if args.partition_by_key:
        conf["partitioner"] = "murmur2_random"
    for kv in args.extra:
        k, sep, v = kv.partition("=")
        if not sep:
            p.error(f"-X needs PROP=VALUE, got {kv!r}")
        conf[k] = v
    producer = Producer(conf)

    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    value_ctx = SerializationContext(args.topic, MessageField.VALUE)
    key_ctx = SerializationContext(args.topic, MessageField.KEY)
    value_ids: set[int] = set()
    key_ids: set[int] = set()
    count = 0
    for lineno, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("a line must be a JSON object")
            value = rec.get("value")
            key = rec.get("key")
            vbytes = value_ser(value, value_ctx)
            kbytes = key_ser(key, key_ctx)
        except Exception as e:  # noqa: BLE001 - report which line, then stop
            sys.stderr.write(f"produce_registry: error: stdin line {lineno}: "
                             f"{type(e).__name__}: {e}\n")
            producer.flush(60)
            return 1
        if value_format in ("avro", "protobuf") and vbytes is not None:
            value_ids.add(schema_id_of(vbytes))
        if args.key_format in ("avro", "protobuf") and kbytes is not None:
            key_ids.add(schema_id_of(kbytes))
        kw: dict[str, Any] = {"value": vbytes, "key": kbytes, "on_delivery": on_delivery}
        if rec.get("partition") is not None:
            kw["partition"] = int(rec["partition"])
        elif not args.partition_by_key:
            kw["partition"] = 0
        while True:
            try:
                producer.produce(args.topic, **kw)
                break
            except BufferError:
                producer.poll(0.1)
            except KafkaException as e:
                sys.stderr.write(f"produce_registry: error: stdin line {lineno}: {e}\n")
                producer.flush(60)
                return 1
        producer.poll(0)
        count += 1
    left = producer.flush(120)
    if left:
        errors.append(f"{left} record(s) not delivered within 120 s")
    if errors:
        for e in errors[:20]:
            sys.stderr.write(f"produce_registry: delivery error: {e}\n")
        return 1

    def one(ids: set[int]):
        if not ids:
            return None
        return sorted(ids)[0] if len(ids) == 1 else sorted(ids)

    print(json.dumps({"value_schema_id": one(value_ids), "key_schema_id": one(key_ids),
                      "count": count}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        import shutil

        for d in _compiled_dirs:
            shutil.rmtree(d, ignore_errors=True)
