"""Maintenance (bench/run --maintain N): an upsert table (position
deletes, format v2) fed by N small incremental syncs of 100 messages, half
of them updates of existing keys, then `topicberg maintain`. Reports data
and delete files before and after, DuckDB's count(*) and a point query
time before and after (bench/maintain_query.py, best of 3), and
maintain's own wall, CPU and peak RSS. The topic is new each time.
"""

import json
import os
import random
import subprocess
import tempfile
import uuid

PER_SYNC = 100


def run(bench, binary, env, syncs):
    run_id = uuid.uuid4().hex[:8]
    topic = f"bench2_maintain_{run_id}"
    subprocess.run([os.path.join(bench.REPO, "scripts/testbed"), "create-topic", topic,
                    str(bench.PARTITIONS)], check=True, stdout=subprocess.DEVNULL)
    dir_ = tempfile.mkdtemp(prefix=f"topicberg-bench-maintain-{run_id}-")
    job = bench.job_file(dir_, env, run_id, topic, "upsert", "position")
    with open(job, "a") as f:
        # Every snapshot but the newest two expires at once; orphans of the
        # syncs (none expected) only after a day.
        f.write('\n[maintain]\nkeep_snapshots = 2\nmax_snapshot_age = "1s"\n')
    rng = random.Random(run_id)
    max_key = 0
    sync_wall = []
    for i in range(syncs):
        keys = []
        for _ in range(PER_SYNC):
            if max_key and rng.random() < 0.5:
                keys.append(rng.randrange(1, max_key + 1))
            else:
                max_key += 1
                keys.append(max_key)
        bench.produce_shape(env, "trips", topic, rng, keys)
        m = bench.sync(binary, job, dir_)
        sync_wall.append(m["wall_s"])
        if (i + 1) % 50 == 0:
            print(f"    maintain bench: {i + 1}/{syncs} syncs", flush=True)
    namespace, table = f"bench_{run_id}_upsert_position", topic
    before = query(env, namespace, table, rng.randrange(1, max_key + 1))
    report = os.path.join(dir_, "maintain.json")
    m = bench.measure([binary, "maintain", "-c", job, "--report-json", report],
                      env={**os.environ, "TOPICBERG_LOG": os.environ.get("TOPICBERG_LOG", "warn")})
    with open(report) as f:
        rep = json.load(f)
    (t,) = [t for t in rep["tables"] if t["table"].endswith(table)]
    after = query(env, namespace, table, rng.randrange(1, max_key + 1))
    result = {
        "syncs": syncs, "messages_per_sync": PER_SYNC, "keys": max_key,
        "median_sync_wall_s": sorted(sync_wall)[len(sync_wall) // 2],
        "before": {**t["before"], **before}, "after": {**t["after"], **after},
        "maintain": m, "report": t,
    }
    print(f"    maintain bench: {t['before']['data_files']} data + {t['before']['delete_files']} delete files -> "
          f"{t['after']['data_files']} + {t['after']['delete_files']}; count(*) {before['count_s']} s -> "
          f"{after['count_s']} s; point {before['point_s']} s -> {after['point_s']} s; "
          f"maintain {m['wall_s']} s, cpu {m['cpu_s']} s, rss {m['peak_rss_mib']} MiB", flush=True)
    return result


def query(env, namespace, table, key):
    out = subprocess.run([env["TESTBED_PYTHON"], os.path.join(os.path.dirname(__file__), "maintain_query.py"),
                          namespace, table, str(key)], check=True, capture_output=True, text=True,
                         env={**os.environ, **env})
    return json.loads(out.stdout)


def table(r):
    b, a = r["before"], r["after"]
    return "\n".join([
        "| | data files | delete files | manifests | snapshots | rows (DuckDB) | count(*) s | point query s |",
        "|---|---|---|---|---|---|---|---|",
        f"| before | {b['data_files']} | {b['delete_files']} | {b['manifests']} | {b['snapshots']} | {b['rows']} "
        f"| {b['count_s']} | {b['point_s']} |",
        f"| after | {a['data_files']} | {a['delete_files']} | {a['manifests']} | {a['snapshots']} | {a['rows']} "
        f"| {a['count_s']} | {a['point_s']} |",
        "",
        f"{r['syncs']} syncs of {r['messages_per_sync']} messages (half updates), {r['keys']} keys; median sync "
        f"{r['median_sync_wall_s']} s; maintain {r['maintain']['wall_s']} s wall, {r['maintain']['cpu_s']} s CPU, "
        f"{r['maintain']['peak_rss_mib']} MiB peak RSS.",
    ])
