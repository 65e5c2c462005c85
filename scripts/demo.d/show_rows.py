#!/usr/bin/env python3
"""Prints canonical reader lines (scripts/readers) as the demo's tables.

  show_rows.py customers < lines   one row per message: id, name, city, tier, offset, key
  show_rows.py orders < lines      orders by status: count and amount
  show_rows.py shipments < lines   one row per shipment: its typed columns
  show_rows.py customers_cdc < lines   the change stream's table: id, name, city, tier, _cdc_op, _cdc_lsn
"""
import json
import sys
from collections import defaultdict


def customers(rows):
    rows = sorted(rows, key=lambda r: (r["id"], r["_kafka_offset"]))
    print(f"{'id':>3}  {'name':<12} {'city':<10} {'tier':<7} {'_kafka_offset':>13}  _kafka_key  _op_type")
    for r in rows:
        print(f"{r['id']:>3}  {r['name']:<12} {r['city']:<10} {r['tier']:<7} {r['_kafka_offset']:>13}"
              f"  {r['_kafka_key']:<10}  {r['_op_type']}")


def customers_cdc(rows):
    rows = sorted(rows, key=lambda r: r["id"])
    print(f"{'id':>3}  {'name':<12} {'city':<10} {'tier':<7} {'_cdc_op':<7} {'_cdc_lsn':>9}"
          "  _cdc_timestamp")
    for r in rows:
        print(f"{r['id']:>3}  {r['name']:<12} {r['city']:<10} {r['tier']:<7} {r['_cdc_op']:<7}"
              f" {r['_cdc_lsn']:>9}  {r['_cdc_timestamp']}")


def orders(rows):
    count, total = defaultdict(int), defaultdict(float)
    for r in rows:
        count[r["status"]] += 1
        total[r["status"]] += r["amount"]
    for status in sorted(count):
        print(f"{status:<10} {count[status]:>3} orders  {total[status]:>10.2f}")
    print(f"{'all':<10} {sum(count.values()):>3} orders  {sum(total.values()):>10.2f}")


def shipments(rows):
    rows = sorted(rows, key=lambda r: r["order_id"])
    print(f"{'order_id':>8}  {'carrier':<7} {'weight_kg':>9}  {'shipped_at':<32} {'address':<28} tracking")
    for r in rows:
        address = f"{r['address']['city']}, {r['address']['country']}"
        print(f"{r['order_id']:>8}  {r['carrier']:<7} {r['weight_kg']:>9}  {r['shipped_at']:<32} "
              f"{address:<28} {r['tracking'] or '-'}")


def main():
    rows = [json.loads(line) for line in sys.stdin]
    shows = {"customers": customers, "customers_cdc": customers_cdc, "orders": orders,
             "shipments": shipments}
    shows[sys.argv[1]](rows)


if __name__ == "__main__":
    main()
