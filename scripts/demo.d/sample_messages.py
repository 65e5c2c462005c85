#!/usr/bin/env python3
"""Seed-shaped sample messages for the demo and the tests.

Prints `key<TAB>value` lines (the format `kcat -K '\t'` and
kafka-console-producer's parse.key take) for the two sample topics of the
product pages topicberg is described from:

  customers: first batch ids 1-8; second batch 2 new keys (9, 10) and 2
             repeated keys (3, 8) with changed values.
  orders:    first batch ids 1-40; second batch 5 new keys (41-45) and 3
             repeated keys (1, 4, 7) with status "delivered".

The data is fixed (no randomness), so every run produces the same bytes.
Usage: sample_messages.py customers|orders first|second
"""
import json
import sys

CITIES = ["Mumbai", "Austin", "Berlin", "Lagos", "Osaka", "Lima", "Toronto", "Dubai"]
TIERS = ["gold", "silver", "bronze"]
FIRST_NAMES = ["Aarav Mehta", "Sofia Rossi", "Liam Carter", "Chen Wei", "Amara Obi",
               "Yuki Tanaka", "Diego Ramos", "Zara Ali"]
PRODUCTS = ["Headphones", "Keyboard", "Monitor", "Mouse", "Webcam", "Laptop", "Desk Lamp", "USB Hub"]
STATUSES = ["placed", "shipped", "delivered"]
T0 = "2026-10-29T15:22:04+00:00"
T1 = "2026-10-30T09:05:41+00:00"


def customer(i, city=None, tier=None, updated=T0, name=None):
    return {
        "id": i,
        "name": name or FIRST_NAMES[(i - 1) % len(FIRST_NAMES)],
        "email": (name or FIRST_NAMES[(i - 1) % len(FIRST_NAMES)]).split()[0].lower() + "@example.com",
        "city": city or CITIES[(i - 1) % len(CITIES)],
        "tier": tier or TIERS[(i - 1) % len(TIERS)],
        "created_at": T0,
        "updated_at": updated,
    }


def order(i, status=None, updated=T0):
    # Amounts in cents so every total is exact; printed as a JSON decimal.
    cents = 1999 + (i * 7919) % 120000
    return {
        "id": i,
        "customer_id": 1 + (i * 5) % 8,
        "product": PRODUCTS[i % len(PRODUCTS)],
        "amount": cents / 100,
        "status": status or STATUSES[i % len(STATUSES)],
        "created_at": T0,
        "updated_at": updated,
    }


def messages(topic, batch):
    if topic == "customers" and batch == "first":
        return [customer(i) for i in range(1, 9)]
    if topic == "customers" and batch == "second":
        return [
            customer(9, city="Pune", tier="silver", name="Maya Patel", updated=T1),
            customer(10, city="São Paulo", tier="bronze", name="Lucas Silva", updated=T1),
            customer(3, city="Austin", tier="gold", updated=T1),
            customer(8, city="Abu Dhabi", tier="silver", updated=T1),
        ]
    if topic == "orders" and batch == "first":
        return [order(i) for i in range(1, 41)]
    if topic == "orders" and batch == "second":
        return [order(i, status="placed", updated=T1) for i in range(41, 46)] + [
            order(i, status="delivered", updated=T1) for i in (1, 4, 7)
        ]
    raise SystemExit(f"unknown topic/batch {topic}/{batch}; usage: {__doc__.splitlines()[-1]}")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    out = sys.stdout
    for m in messages(sys.argv[1], sys.argv[2]):
        out.write(f"{m['id']}\t{json.dumps(m, ensure_ascii=False, separators=(',', ':'))}\n")


if __name__ == "__main__":
    main()
