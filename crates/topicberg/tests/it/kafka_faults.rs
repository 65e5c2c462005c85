//! Kafka-side faults: a retention gap, partitions added between
//! syncs, another member joining the job's consumer group during a sync,
//! and a broker restart during a sync. Every test compares what the tables
//! hold (read with DuckDB) with what was produced: nothing lost (unless the
//! job allowed it, and then exactly the deleted range), nothing twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;

use crate::support::{
    add_partitions, create_topic, create_topic_on, delete_records_before, faults_broker,
    group_offsets, plaintext, produce_to_partitions, read_rows, restart_kafka_faults, strip_ansi,
    sync_progress, table_report, throttle_consumer, wait_until, watermarks, Catalog, Job,
};
use crate::testbed::{get, unique_name};

/// `(partition, key, value)` messages with ids `ids`, spread over
/// `partitions` round robin (id `i` lands on partition `i % partitions`).
fn messages(ids: std::ops::Range<i64>, partitions: i32) -> Vec<(i32, String, String)> {
    ids.map(|i| {
        (
            (i % partitions as i64) as i32,
            format!("k{i}"),
            format!(r#"{{"id":{i}}}"#),
        )
    })
    .collect()
}

/// Runs a sync with `--report-json`; returns the process output and the
/// report (`Value::Null` when the sync wrote none).
fn run_sync(job: &Job) -> (Output, Value) {
    let report = job.scratch_file("report.json");
    let out = job.run("sync", &["--report-json", report.to_str().unwrap()], &[]);
    let json = std::fs::read(&report)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("report JSON"))
        .unwrap_or(Value::Null);
    (out, json)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `(partition, offset) -> id` of every row, asserting no position twice.
fn positions(job: &Job, topic: &str) -> BTreeMap<(i64, i64), i64> {
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(topic));
    let mut out = BTreeMap::new();
    for r in &rows {
        let key = (
            r["_kafka_partition"].as_i64().unwrap(),
            r["_kafka_offset"].as_i64().unwrap(),
        );
        let id = r["id"].as_i64().unwrap();
        assert!(
            out.insert(key, id).is_none(),
            "{topic}: message at partition {} offset {} is in the table twice",
            key.0,
            key.1
        );
    }
    out
}

/// Where each id of `messages` landed, given that the topic was empty and
/// each partition got its messages in slice order.
fn expected_positions(messages: &[(i32, String, String)]) -> BTreeMap<(i64, i64), i64> {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    messages
        .iter()
        .map(|(p, key, _)| {
            let offset = next.entry(*p).or_insert(0);
            let position = (*p as i64, *offset);
            *offset += 1;
            (position, key[1..].parse().unwrap())
        })
        .collect()
}

/// Retention deleted messages the job never read: the sync fails that
/// table naming the partition and the lost range, commits nothing and
/// leaves the group alone; with `allow_data_loss = true` it warns with the
/// same range and goes on from the log start offset.
#[test]
fn retention_gap_fails_with_the_lost_range_unless_allow_data_loss() {
    let topic = unique_name("retention");
    create_topic(&topic, 2);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let first = messages(0..100, 2);
    produce_to_partitions(&plaintext(), &topic, &first);
    job.sync();
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 2),
        [Some(50), Some(50)]
    );

    // 150 more (offsets 50..125 on each partition); retention (DeleteRecords)
    // then removes partition 1 below offset 90: offsets 50..90 were never read.
    let second = messages(100..250, 2);
    produce_to_partitions(&plaintext(), &topic, &second);
    delete_records_before(&topic, 1, 90);
    assert_eq!(watermarks(&plaintext(), &topic, 1), (90, 125));

    let (out, report) = run_sync(&job);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let expected_error = format!(
        "{topic}[1]: offsets 50..90 (40 messages) were deleted by the topic's retention before \
         this job read them; they are lost. Set allow_data_loss = true on the [[streams]] entry \
         for this topic to accept the loss and go on"
    );
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"], expected_error.as_str(), "{t}");
    assert!(stdout.contains(&expected_error), "{stdout}");
    // Nothing of the table moved: rows, table offsets, group offsets.
    assert_eq!(
        positions(&job, &topic),
        expected_positions(&first),
        "the failed sync must not change the table"
    );
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 2),
        [Some(50), Some(50)],
        "the failed sync must not move the group"
    );

    // The user accepts the loss.
    job.append(&format!(
        "\n[[streams]]\ntopic = \"{topic}\"\nallow_data_loss = true\n"
    ));
    let (out, report) = run_sync(&job);
    let stderr = strip_ansi(&text(&out.stderr));
    assert!(out.status.success(), "{}\n{stderr}", text(&out.stdout));
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["status"], "committed", "{t}");
    assert_eq!(t["expired_messages"], 40, "{t}");
    assert_eq!(t["records"], 75 + 35, "{t}");
    assert!(
        stderr.contains(&format!(
            "{topic}[1]: offsets 50..90 (40 messages) were deleted by the topic's retention \
             before this job read them; they are lost. allow_data_loss = true on this stream: \
             going on from offset 90"
        )),
        "the warning must name the lost range: {stderr}"
    );
    assert!(stderr.contains("WARN"), "{stderr}");
    let rows = positions(&job, &topic);
    let mut expected = expected_positions(&[first, second].concat());
    expected.retain(|&(p, o), _| !(p == 1 && (50..90).contains(&o)));
    assert_eq!(rows.len(), 100 + 150 - 40);
    assert_eq!(rows, expected, "old rows + every retained new message");
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 2),
        [Some(125), Some(125)]
    );
}

/// Partitions added to a topic after a sync are read from their first
/// offset by the next one (append mode): every message exactly once.
#[test]
fn partitions_added_since_the_last_sync_are_read_from_their_earliest_offset() {
    let topic = unique_name("grown");
    create_topic(&topic, 2);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let first = messages(0..40, 2);
    produce_to_partitions(&plaintext(), &topic, &first);
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&topic))["records"], 40);

    add_partitions(&topic, 4);
    // Keyed messages on all four partitions (ids 40.. round robin over 4).
    let second = messages(40..140, 4);
    produce_to_partitions(&plaintext(), &topic, &second);
    assert_eq!(watermarks(&plaintext(), &topic, 3), (0, 25));

    let report = job.sync();
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["records"], 100, "{t}");
    assert_eq!(t["expired_messages"], 0, "{t}");
    let rows = positions(&job, &topic);
    let ids: BTreeSet<i64> = rows.values().copied().collect();
    assert_eq!(rows.len(), 140, "every message exactly once");
    assert_eq!(ids, (0..140).collect());
    for p in [2, 3] {
        let offsets: Vec<i64> = rows.keys().filter(|k| k.0 == p).map(|k| k.1).collect();
        assert_eq!(
            offsets,
            (0..25).collect::<Vec<_>>(),
            "new partition {p} read from offset 0"
        );
    }
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 4),
        [Some(45), Some(45), Some(25), Some(25)]
    );
    // Nothing new: nothing read twice.
    let t = table_report(&job.sync(), &job.table(&topic)).clone();
    assert_eq!(
        (t["status"].as_str(), t["records"].as_u64()),
        (Some("unchanged"), Some(0))
    );
}

/// Waits for a background sync to exit (at most `deadline`); returns its
/// exit status, report (`Null` if none) and log.
fn finish(
    mut child: crate::support::Running,
    report: &Path,
    log: &Path,
    deadline: Duration,
) -> (std::process::ExitStatus, Value, String) {
    let mut status = None;
    wait_until("the sync to exit", deadline, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let json = std::fs::read(report)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("report JSON"))
        .unwrap_or(Value::Null);
    (
        status.unwrap(),
        json,
        strip_ansi(&std::fs::read_to_string(log).unwrap_or_default()),
    )
}

/// The log lines worth keeping in a test's output: warnings and errors.
fn warnings(log: &str) -> String {
    log.lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("error"))
        .take(20)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The Kafka broker is restarted (SIGTERM, start again) while a sync drains
/// 300,000 messages from it. The sync either completes or fails with an
/// error; syncs are then run until one succeeds, and the table holds every
/// produced message exactly once, at the offset it was produced to.
#[test]
fn broker_restart_during_a_sync_loses_and_duplicates_nothing() {
    let broker = faults_broker();
    let topic = unique_name("restart");
    create_topic_on(&broker, &topic, 3);
    let produced = messages(0..300_000, 3);
    produce_to_partitions(&broker, &topic, &produced);
    // Small batches: the drain publishes its progress once a batch, and the
    // restart waits for the first progress (65,536-row batches were only
    // published near the end of a busy machine's drain).
    let job = Job::new(
        Catalog::Seaweed,
        &[&topic],
        "",
        "[sync]\nbatch_rows = 4096\n",
    );
    job.set_bootstrap(&get("TESTBED_KAFKA_FAULTS_BOOTSTRAP"));
    // About 10 MB on the wire: 1 MiB/s makes the drain last ~10 s, so the
    // restart lands in its middle.
    throttle_consumer(
        &get("TESTBED_KAFKA_FAULTS_BOOTSTRAP"),
        &job.group(),
        1 << 20,
    );

    let (report, log) = (
        job.scratch_file("report.json"),
        job.scratch_file("sync.log"),
    );
    let started = Instant::now();
    let mut child = job.spawn_sync(&report, &log);
    wait_until(
        "the sync to read messages",
        Duration::from_secs(180),
        || sync_progress(&log) > 0 || child.try_wait().unwrap().is_some(),
    );
    let read_before = sync_progress(&log);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the sync ended before the restart; make the topic bigger:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let took = restart_kafka_faults();
    let (status, first, first_log) = finish(child, &report, &log, Duration::from_secs(400));
    eprintln!(
        "restart after {read_before} records ({:?} into the sync) took {took:?}; the sync \
         ended {status} after {:?}: report {first}\n{}",
        started.elapsed() - took,
        started.elapsed(),
        warnings(&first_log)
    );
    if status.success() {
        let t = table_report(&first, &job.table(&topic));
        assert_eq!(t["status"], "committed", "{t}");
        // The batch reader (PLAINTEXT) logs the lost connection as it
        // reconnects; librdkafka reports it itself (its log,
        // `Disconnected` / `Connection refused`).
        assert!(
            first_log.contains("fetch failed; reconnecting")
                || first_log.contains("fetch error; librdkafka retries")
                || first_log.contains("Disconnected")
                || first_log.contains("Connection refused"),
            "the sync must have seen the broker go away: {first_log}"
        );
    } else {
        assert!(status.code().is_some(), "no crash: {status}");
        let said_why = first_log.contains("error")
            || first["tables"]
                .as_array()
                .is_some_and(|ts| ts.iter().any(|t| !t["error"].is_null()))
            || first["group_offsets_committed"] == false;
        assert!(said_why, "a failed sync must say why:\n{first_log}");
    }

    // Syncs until one succeeds (the broker is back; a few tries at most).
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (out, report) = run_sync(&job);
        if out.status.success() {
            eprintln!("sync {attempts} after the restart succeeded: {report}");
            break;
        }
        assert!(
            attempts < 5,
            "5 syncs after the restart failed; last:\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let rows = positions(&job, &topic);
    assert_eq!(rows.len(), produced.len(), "row count");
    assert_eq!(
        rows,
        expected_positions(&produced),
        "every message exactly once, at its partition and offset"
    );
    assert_eq!(
        group_offsets(&broker, &job.group(), &topic, 3),
        [Some(100_000); 3]
    );
}

/// Another consumer joins the job's consumer group (`subscribe`, as a
/// second copy of a consumer application would) while a sync drains
/// 210,000 messages. topicberg assigns its partitions itself and never
/// joins the group, so nothing is revoked from it: the sync reads to its
/// end and commits the table. The group-offset commit is refused while
/// the other member holds the group; it is a copy, and the next sync
/// (after the member left) repairs it from the table. Nothing is lost or
/// read twice.
#[test]
fn another_member_joining_the_group_during_a_sync_loses_and_duplicates_nothing() {
    let topic = unique_name("rebalance");
    create_topic(&topic, 3);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let first_batch = messages(0..30, 3);
    produce_to_partitions(&plaintext(), &topic, &first_batch);
    job.sync();
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 3),
        [Some(10); 3]
    );
    let second = messages(30..210_030, 3);
    produce_to_partitions(&plaintext(), &topic, &second);
    // About 7 MB on the wire: 512 KiB/s makes the drain last ~14 s, so the
    // other member joins in its middle. Only this job's client id is slowed.
    throttle_consumer(&get("TESTBED_KAFKA_BOOTSTRAP"), &job.group(), 1 << 19);

    let (report, log) = (
        job.scratch_file("report.json"),
        job.scratch_file("sync.log"),
    );
    let mut child = job.spawn_sync(&report, &log);
    wait_until(
        "the sync to read messages",
        Duration::from_secs(180),
        || sync_progress(&log) > 0 || child.try_wait().unwrap().is_some(),
    );
    let member: BaseConsumer = plaintext()
        .client_config()
        .set("group.id", job.group())
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    member.subscribe(&[&topic]).expect("subscribe");
    wait_until("the other member to join", Duration::from_secs(60), || {
        let _ = member.poll(Duration::from_millis(100));
        member.assignment().is_ok_and(|a| a.count() == 3)
    });
    let joined_at = sync_progress(&log);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the sync ended before the other member joined; make the topic bigger"
    );
    // Stay in the group (polling, without committing) until the sync ends.
    let mut status = None;
    wait_until("the sync to exit", Duration::from_secs(400), || {
        let _ = member.poll(Duration::from_millis(100));
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let status = status.unwrap();
    let first_log = strip_ansi(&std::fs::read_to_string(&log).unwrap());
    let first: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let still_member = member.assignment().is_ok_and(|a| a.count() == 3);
    let offsets_during = group_offsets(&plaintext(), &job.group(), &topic, 3);
    eprintln!(
        "member joined after {joined_at} records; the sync ended {status}; member still \
         assigned: {still_member}; group offsets: {offsets_during:?}; report {first}\n{}",
        warnings(&first_log)
    );
    assert!(still_member, "the other member must still hold the group");
    let t = table_report(&first, &job.table(&topic));
    assert_eq!(t["status"], "committed", "{t}");
    assert_eq!(t["records"], 210_000, "the sync read to its end: {t}");
    // What happens to the group commit while another member holds the group:
    // refused, left to the members; the sync succeeded (its tables hold the
    // offsets).
    assert_eq!(first["group_offsets_committed"], false, "{first}");
    assert_eq!(first["group_offsets_left_to_members"], true, "{first}");
    assert_eq!(status.code(), Some(0), "the tables committed: {first_log}");
    assert!(
        first_log.contains("the consumer group has members")
            && first_log.contains("give this job a consumer_group of its own"),
        "the log must say why the group's offsets were not committed: {first_log}"
    );
    assert_eq!(
        offsets_during,
        [Some(10); 3],
        "the group commit was refused"
    );
    drop(member); // leaves the group

    let report = job.sync();
    assert_eq!(report["group_offsets_committed"], true, "{report}");
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["records"], 0, "nothing read twice: {t}");
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 3),
        [Some(70_010); 3],
        "the next sync repaired the group from the table"
    );
    let rows = positions(&job, &topic);
    assert_eq!(rows.len(), 210_030);
    assert_eq!(rows, expected_positions(&[first_batch, second].concat()));
}
