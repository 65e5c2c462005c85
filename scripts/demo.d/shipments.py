#!/usr/bin/env python3
"""The demo's Avro topic: shipments of the sample orders, written through the
schema registry by Confluent's AvroSerializer (scripts/produce_registry.py).

  shipments.py schema v1|v2      prints the Avro schema (v2 adds an optional "tracking")
  shipments.py first|second      prints produce_registry.py input lines

first: shipments of orders 1-5; second: orders 6-8, with a tracking number.
The data is fixed, so every run produces the same records.
"""
import json
import sys

CARRIERS = ["DHL", "UPS", "FEDEX"]
CITIES = [("Mumbai", "IN"), ("Austin", "US"), ("Berlin", "DE"), ("Lagos", "NG"), ("Osaka", "JP")]


def schema(version):
    fields = [
        {"name": "order_id", "type": "long"},
        {"name": "carrier", "type": {"type": "enum", "name": "Carrier", "symbols": CARRIERS}},
        {"name": "weight_kg", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "shipped_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "country", "type": "string"}]}},
    ]
    if version == "v2":
        fields.append({"name": "tracking", "type": ["null", "string"], "default": None})
    return {"type": "record", "name": "Shipment", "namespace": "demo", "fields": fields}


def shipment(order_id, tracking=False):
    city, country = CITIES[order_id % len(CITIES)]
    value = {
        "order_id": order_id,
        "carrier": CARRIERS[order_id % len(CARRIERS)],
        "weight_kg": f"{order_id * 1.25 + 0.5:.2f}",
        "shipped_at": f"2026-10-30T{8 + order_id:02d}:15:00+00:00",
        "address": {"city": city, "country": country},
    }
    if tracking:
        value["tracking"] = f"TRK{order_id:06d}"
    return {"key": str(order_id), "value": value}


def main():
    what = sys.argv[1]
    if what == "schema":
        print(json.dumps(schema(sys.argv[2]), indent=1))
        return
    ids = range(1, 6) if what == "first" else range(6, 9)
    for i in ids:
        print(json.dumps(shipment(i, tracking=what == "second")))


if __name__ == "__main__":
    main()
