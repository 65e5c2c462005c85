#!/usr/bin/env python3
"""Maintain Iceberg tables with Apache Spark the way a lakehouse team does,
through the same REST catalog topicberg writes to: what the product pages
advise (rewrite_data_files) and what every lakehouse runs on a schedule.

    spark_maintain.py [--catalog seaweed|fixture ...] [--steps a,b,...]
                      [--commit-retries N] [--rerun-manifests N] ns.t [ns.t ...]

Steps, in this order, on every table (default: all):
  compact           CALL system.rewrite_data_files(rewrite-all): applies the
                    position deletes / deletion vectors, one file per table
  rewrite_deletes   CALL system.rewrite_position_delete_files(rewrite-all)
  rewrite_manifests CALL system.rewrite_manifests
  alter             ALTER TABLE ADD COLUMN spark_note string, SET TBLPROPERTIES
  partition         ALTER TABLE ADD PARTITION FIELD bucket(4, id)
  expire            CALL system.expire_snapshots(retain_last => 1, all older)
  orphans           remove orphan files (Action API: every unreferenced file, however new;
                    with --orphans-before-start only those written before this
                    script started, as a team whose writers run meanwhile
                    must: a file a writer commits while the orphan pass lists
                    the table looks unreferenced to it)
  tag               ALTER TABLE CREATE TAG maintained, CREATE BRANCH audit
  describe          DESCRIBE TABLE EXTENDED (read only: the table's
                    properties, its sort order among them)

--rerun-manifests N runs rewrite_manifests again, up to N times, when it fails
because a writer's commit replaced a manifest it was rewriting (Iceberg's
ValidationException "Deleted manifest ... could not be found in the latest
snapshot": a follower's commit merging its small manifests, see the follow
chapter), and any statement whose commit failed after Iceberg's own retries
(CommitFailedException), up to N times more, as a team's scheduler reruns a
failed maintenance job.

--commit-retries N sets the table property commit.retry.num-retries (Iceberg's
default 4) before the steps, as a team does beside a writer that commits
every second: each of Spark's commits that meets one of the writer's
refreshes and tries again, and 4 tries run out under load.

Prints one JSON line per table: the snapshots left and each step's result.
One Spark session for all tables (the JVM start is most of the time).
Exit codes as the readers (common.py).
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import spark_reader  # noqa: E402
from common import EXIT_FAILURE, ReaderError  # noqa: E402

STEPS = ["compact", "rewrite_deletes", "rewrite_manifests", "alter", "partition", "expire", "orphans",
         "tag", "describe"]
FAR_FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"


def die(message: str, code: int) -> None:
    sys.stderr.write(f"spark_maintain: error: {message}\n")
    sys.exit(code)


def statements(cat: str, step: str, name: str, dotted: str) -> list[str]:
    return {
        "compact": [f"CALL {cat}.system.rewrite_data_files(table => '{dotted}', "
                    "options => map('rewrite-all', 'true'))"],
        "rewrite_deletes": [f"CALL {cat}.system.rewrite_position_delete_files(table => '{dotted}', "
                            "options => map('rewrite-all', 'true'))"],
        "rewrite_manifests": [f"CALL {cat}.system.rewrite_manifests(table => '{dotted}')"],
        "alter": [f"ALTER TABLE {name} ADD COLUMN spark_note string",
                  f"ALTER TABLE {name} SET TBLPROPERTIES ('maintained-by' = 'spark')"],
        "partition": [f"ALTER TABLE {name} ADD PARTITION FIELD bucket(4, id)"],
        "expire": [f"CALL {cat}.system.expire_snapshots(table => '{dotted}', "
                   f"older_than => {FAR_FUTURE}, retain_last => 1)"],
        # The procedure refuses intervals under 24 hours; the action does not.
        "orphans": [],
        "tag": [f"ALTER TABLE {name} CREATE TAG maintained",
                f"ALTER TABLE {name} CREATE BRANCH audit"],
        "describe": [f"DESCRIBE TABLE EXTENDED {name}"],
    }[step]


def jdbc_catalog(cfg: common.CatalogConfig) -> tuple[str, dict[str, str]]:
    """topicberg's embedded catalog (a SQLite file in Iceberg's JDBC catalog
    layout) as a Spark catalog: Iceberg's JdbcCatalog names its rows by the
    catalog's name, so the Spark catalog takes the embedded catalog's name."""
    name = cfg.sql_name
    p = f"spark.sql.catalog.{name}"
    return name, {
        p: "org.apache.iceberg.spark.SparkCatalog",
        f"{p}.type": "jdbc",
        f"{p}.uri": "jdbc:sqlite:" + common.sql_catalog_file(cfg),
        f"{p}.warehouse": "file://" + os.path.abspath(cfg.sql_path),
        f"{p}.cache-enabled": "false",
    }


STARTED_MS = int(time.time() * 1000)


def remove_orphan_files(spark, name: str, before_start: bool) -> list[str]:
    """Every file under the table's location that no snapshot references,
    however new, or only those written before the script started (the Action
    API; the procedure needs 24 hours). S3 stamps files to the second: 2 s
    of margin."""
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    cutoff = STARTED_MS - 2_000 if before_start else int(time.time() * 1000) + 60_000
    result = (jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
              .deleteOrphanFiles(table).usePrefixListing(True).olderThan(cutoff).execute())
    return [str(f) for f in result.orphanFileLocations()]


MANIFEST_GONE = "could not be found in the latest snapshot"
# Iceberg's CommitFailedException once its own retries ran out (a writer
# committing every second won each round), e.g. "Table metadata refresh is
# required" from the REST catalog.
COMMIT_FAILED = "CommitFailedException"


def run_step(spark, sql: str, step: str, reruns: int, done: dict) -> list:
    """The statement's rows; run again up to `reruns` times when a writer's
    commit got in its way, as a team's scheduler reruns a failed
    maintenance job: rewrite_manifests when a writer replaced one of its
    manifests meanwhile (counted in done["rewrite_manifests_reruns"]), any
    statement whose commit failed after Iceberg's own retries (counted in
    done["commit_reruns"])."""
    while True:
        try:
            return spark.sql(sql).collect()
        except Exception as e:  # noqa: BLE001 - Py4J wraps Java's ValidationException
            stale = step == "rewrite_manifests" and MANIFEST_GONE in str(e)
            count = "rewrite_manifests_reruns" if stale else "commit_reruns"
            if not (stale or COMMIT_FAILED in str(e)) or done.get(count, 0) >= reruns:
                raise
            done[count] = done.get(count, 0) + 1


def maintain(spark, cat: str, table: common.TableName, steps: list[str], orphans_before_start: bool,
             commit_retries: int | None, rerun_manifests: int = 0) -> dict:
    name = ".".join(spark_reader.quote(x) for x in (cat,) + table.namespace + (table.name,))
    dotted = ".".join(table.namespace + (table.name,))
    done = {"table": table.dotted}
    if commit_retries is not None:
        run_step(spark, f"ALTER TABLE {name} SET TBLPROPERTIES "
                 f"('commit.retry.num-retries' = '{commit_retries}')", "alter", rerun_manifests, done)
    for step in steps:
        results = []
        for sql in statements(spark_reader.quote(cat), step, name, dotted):
            rows = run_step(spark, sql, step, rerun_manifests, done)
            results.extend([str(v) for v in r] for r in rows)
        if step == "orphans":
            results.append(remove_orphan_files(spark, name, orphans_before_start))
        done[step] = results
    snapshots = spark.sql(f"SELECT snapshot_id, operation FROM {name}.snapshots").collect()
    done["snapshots"] = [[str(r[0]), r[1]] for r in snapshots]
    return done


def main() -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_catalog_args(p)
    p.add_argument("--steps", default=",".join(STEPS), help="comma-separated subset of the steps")
    p.add_argument("--orphans-before-start", action="store_true",
                   help="orphans: only files written before this script started (writers run meanwhile)")
    p.add_argument("--commit-retries", type=int, default=None,
                   help="set commit.retry.num-retries on each table before the steps")
    p.add_argument("--rerun-manifests", type=int, default=0,
                   help="run rewrite_manifests again up to N times when a writer replaced one of its manifests")
    p.add_argument("tables", nargs="+", help="namespace.table")
    args = p.parse_args()
    steps = [s for s in STEPS if s in args.steps.split(",")]
    unknown = set(args.steps.split(",")) - set(STEPS)
    if unknown:
        die(f"unknown steps: {sorted(unknown)}", common.EXIT_USAGE)
    try:
        cfg = common.resolve_catalog(args)
        cat, extra = spark_reader.CATALOG, {}
        if cfg.catalog == "sql":
            cat, extra = jdbc_catalog(cfg)
        spark = spark_reader.session(cfg, extra)
        try:
            for t in args.tables:
                print(json.dumps(maintain(spark, cat, common.parse_table(t), steps,
                                         args.orphans_before_start, args.commit_retries,
                                         args.rerun_manifests)), flush=True)
        finally:
            spark.stop()
    except ReaderError as e:
        die(str(e), e.code)
    except Exception as e:  # noqa: BLE001 - one line, not a Java stack trace
        die(spark_reader.java_error(e), EXIT_FAILURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
