"""Steady state of upsert (bench/run --steady): a table of BASE rows, then
SYNCS syncs of PER_SYNC messages each, half of them updates of existing
keys (so every sync writes real delete files), for position deletes (v2)
and deletion vectors (v3). Per sync: msg/s, CPU µs per message, peak RSS;
after each: the key index's size on disk (`<state_dir>`, its runs).

The topic `bench2_steady_<BASE>` holds the base rows (keys 1..BASE, all
new) and is kept; the update batches are produced into it before each
sync (not timed), with a fixed seed per run.
"""

import os
import random
import shutil
import statistics
import subprocess
import tempfile
import uuid

UPDATE_FRACTION = 0.5


def dir_size_mib(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return round(total / 2**20, 1)


def batch_keys(rng, n, max_key):
    """n keys: half updates of random existing keys, half new ones."""
    keys = []
    for _ in range(n):
        if rng.random() < UPDATE_FRACTION:
            keys.append(rng.randrange(1, max_key + 1))
        else:
            max_key += 1
            keys.append(max_key)
    return keys, max_key


def run(bench, binary, env, base, syncs, per_sync, keep_tables=False):
    """bench: the bench/run module (load, produce_shape, job_file, sync, topic_size)."""
    topic = f"bench2_steady_{base}"
    bootstrap = env["TESTBED_KAFKA_BOOTSTRAP"]
    size = bench.topic_size(bootstrap, topic)
    if size is None:
        subprocess.run([os.path.join(bench.REPO, "scripts/testbed"), "create-topic", topic,
                        str(bench.PARTITIONS)], check=True)
        rng = random.Random(f"steady-{base}")
        bench.produce_shape(env, "trips", topic, rng, range(1, base + 1))
        size = bench.topic_size(bootstrap, topic)
        print(f"  {topic}: loaded {size} messages (not timed)", flush=True)
    elif size != base:
        raise SystemExit(f"bench: {topic} holds {size} messages, not {base}: an earlier --steady run "
                         f"added its updates; delete the topic and run again")
    results = {}
    for fmt in ("position", "dv"):
        run_id = uuid.uuid4().hex[:8]
        dir_ = tempfile.mkdtemp(prefix=f"topicberg-bench-steady-{run_id}-")
        try:
            job = bench.job_file(dir_, env, run_id, topic, "upsert", fmt)
            first = bench.sync(binary, job, dir_)
            bench.rates(first, first["messages"], first["mb"])
            first["key_index_mib"] = dir_size_mib(os.path.join(dir_, "state"))
            print(f"    steady {fmt}: first sync {first['messages']:,} rows, {first['msgs_per_s']:,} msg/s, "
                  f"{first['cpu_us_per_msg']} CPU µs/msg, index {first['key_index_mib']} MiB", flush=True)
            rng = random.Random(f"steady-{fmt}-{run_id}")
            max_key = base
            per = []
            for i in range(syncs):
                keys, max_key = batch_keys(rng, per_sync, max_key)
                bench.produce_shape(env, "trips", topic, rng, keys)
                m = bench.sync(binary, job, dir_)
                bench.rates(m, m["messages"], m["mb"])
                m["key_index_mib"] = dir_size_mib(os.path.join(dir_, "state"))
                per.append(m)
                print(f"    steady {fmt}: sync {i + 1}/{syncs}: {m['messages']:,} messages, {m['msgs_per_s']:,} msg/s, "
                      f"{m['cpu_us_per_msg']} CPU µs/msg, {m['deletes']:,} deletes in {m['delete_files']} files, "
                      f"rss {m['peak_rss_mib']} MiB, index {m['key_index_mib']} MiB", flush=True)
        finally:
            shutil.rmtree(dir_, ignore_errors=True)
            if not keep_tables:
                bench.drop_run_tables(env, run_id)
        results[fmt] = {"first": first, "syncs": per}
        # Later syncs of the other format read the updates of this one too:
        # the topic grows; each format's job starts from the beginning.
    return results


def table(results, base, per_sync):
    lines = ["| delete format | sync | msgs/s | CPU µs/msg | peak RSS MiB | deletes per sync | key index MiB |",
             "|---|---|---|---|---|---|---|"]
    for fmt, r in results.items():
        f = r["first"]
        lines.append(f"| {fmt} | first ({f['messages']:,} rows) | {f['msgs_per_s']:,} | {f['cpu_us_per_msg']:.2f} "
                     f"| {f['peak_rss_mib']:.0f} | - | {f['key_index_mib']} |")
        syncs = r["syncs"]
        if not syncs:
            continue
        med = lambda k: statistics.median(s[k] for s in syncs)  # noqa: E731
        lo = lambda k: min(s[k] for s in syncs)  # noqa: E731
        hi = lambda k: max(s[k] for s in syncs)  # noqa: E731
        lines.append(
            f"| {fmt} | {len(syncs)} x {per_sync:,} (50% updates), median (min-max) "
            f"| {med('msgs_per_s'):,.0f} ({lo('msgs_per_s'):,}-{hi('msgs_per_s'):,}) "
            f"| {med('cpu_us_per_msg'):.2f} ({lo('cpu_us_per_msg'):.2f}-{hi('cpu_us_per_msg'):.2f}) "
            f"| {hi('peak_rss_mib'):.0f} (max) | {med('deletes'):,.0f} | {syncs[-1]['key_index_mib']} (last) |")
    return "\n".join(lines)
