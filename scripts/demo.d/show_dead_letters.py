"""Prints a dead-letter table's rows (reader JSON lines on stdin): where each
message came from, its raw value decoded from base64, and the error."""
import base64
import json
import sys

for line in sys.stdin:
    row = json.loads(line)
    value = base64.b64decode(row["_kafka_value_base64"] or "").decode("utf-8", "replace")
    print(f"{row['_kafka_topic']}[{row['_kafka_partition']}]@{row['_kafka_offset']}: {value!r}")
    print(f"  error: {row['_error']}")
