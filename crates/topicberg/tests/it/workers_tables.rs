//! Three workers of one job that start at once on a table that does not
//! exist yet, then meet a new field and invalid messages on partitions
//! each of them owns: the table is created once, the new column added once
//! (whichever worker's change lands first, the others adopt it), every
//! value lands in it, and each invalid message is in the dead-letter table
//! exactly once; no worker's round fails on another's change.

use serde_json::{json, Value};

use crate::support::{plaintext, produce_to_partitions, read_rows, wait_until, Catalog, Rng};
use crate::workers::{Workers, PARTITIONS, WITHIN};

/// `count` messages to the appended topic, one partition after another,
/// with `coupon` when `coupons`; their ids join the model. The ids that
/// get a coupon from the first: returned.
fn produce(workers: &mut Workers, count: u64, coupons: bool) -> u64 {
    let first = workers.next_id;
    workers.next_id += count;
    let messages: Vec<(i32, String, String)> = (first..first + count)
        .map(|id| {
            let value = match coupons {
                true => json!({"id": id, "coupon": format!("C{id}")}),
                false => json!({"id": id}),
            };
            (
                (id % PARTITIONS as u64) as i32,
                id.to_string(),
                value.to_string(),
            )
        })
        .collect();
    produce_to_partitions(&plaintext(), &workers.appended, &messages);
    workers.appended_ids.extend(first..first + count);
    first
}

#[test]
fn workers_starting_at_once_create_evolve_and_dead_letter_one_table_together() {
    let mut workers = Workers::with(3, "");
    let topic = workers.appended.clone();
    workers.job.append(&format!(
        "\n[[streams]]\ntopic = \"{topic}\"\non_invalid = \"dlq\"\n"
    ));
    // The upsert table exists too (the model reads both).
    workers.produce(&mut Rng::seeded("TOPICBERG_WORKERS_SEED", "tables"), 24);
    produce(&mut workers, 240, false);
    for n in 0..3 {
        workers.start(n);
    }
    workers.wait_balanced("three workers started at once");
    workers.wait_visible("the table created by one worker, adopted by the others");

    // A new field on every partition: each worker meets it in its round.
    let coupons_from = produce(&mut workers, 240, true);
    workers.wait_visible("the new column added");
    let table = workers.job.table(&topic);
    let rows = read_rows("duckdb", Catalog::Seaweed, &table);
    for row in &rows {
        let id = row["id"].as_u64().expect("an id");
        let want = (id >= coupons_from).then(|| format!("C{id}"));
        assert_eq!(row["coupon"].as_str(), want.as_deref(), "{row}");
    }

    // An invalid message on every partition, valid ones after them.
    let broken: Vec<(i32, String, String)> = (0..PARTITIONS)
        .map(|p| (p, format!("bad{p}"), "{not json".to_string()))
        .collect();
    produce_to_partitions(&plaintext(), &topic, &broken);
    produce(&mut workers, 120, true);
    workers.wait_visible("past the invalid messages");
    let dlq = format!("{table}__dlq");
    let mut dead: Vec<Value> = Vec::new();
    wait_until(
        "every invalid message in the dead-letter table",
        WITHIN,
        || {
            dead = read_rows("duckdb", Catalog::Seaweed, &dlq);
            dead.len() >= PARTITIONS as usize
        },
    );
    let mut places: Vec<i64> = dead
        .iter()
        .map(|d| d["_kafka_partition"].as_i64().unwrap())
        .collect();
    places.sort();
    assert_eq!(
        places,
        (0..PARTITIONS as i64).collect::<Vec<_>>(),
        "{dead:?}"
    );
    workers.stop_all();
    for log in &workers.logs {
        let text = crate::support::strip_ansi(&std::fs::read_to_string(log).unwrap_or_default());
        let failed: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("table failed"))
            .collect();
        assert!(failed.is_empty(), "{}: {failed:#?}", log.display());
    }
    workers.check("pyiceberg", "at the end");
}
