//! One key's change events on several partitions (a repartitioned change
//! topic): the source's log position (`source.lsn`, kept as `_cdc_lsn`)
//! decides which change wins, never the Kafka timestamp or the order the
//! partitions are read in, within a sync and against the rows an earlier
//! sync committed. The events are written as Debezium's PostgreSQL
//! connector writes them (JSON without the Connect schema), with Kafka
//! timestamps that contradict their positions.

use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

use crate::support::cdc::change_job;
use crate::support::{create_topic, plaintext, read_rows, Catalog, Job};
use crate::testbed::unique_name;

/// `(partition, id, event)`: the event `None` is the Kafka tombstone
/// Debezium writes after a delete.
type Message = (i32, i64, Option<Value>);

/// A change event of row `id` at log position `lsn`: `op` c/u with `v`,
/// or d (no `after`).
fn event(op: &str, id: i64, lsn: i64, v: &str) -> Option<Value> {
    let after = (op != "d").then(|| json!({"id": id, "v": v}));
    Some(json!({
        "before": null, "after": after, "op": op, "ts_ms": 1,
        "source": {"connector": "postgresql", "lsn": lsn, "ts_ms": 1},
    }))
}

/// Produces `messages` in order; the Kafka timestamp of each is newer on
/// partition 0 than on partition 1, the opposite of their positions.
fn produce(topic: &str, messages: &[Message]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (partition, id, value) in messages {
        let key = json!({ "id": id }).to_string();
        let value = value.as_ref().map(Value::to_string);
        let timestamp = if *partition == 0 {
            3_000_000
        } else {
            1_000_000
        };
        let mut record = BaseRecord::to(topic)
            .partition(*partition)
            .key(&key)
            .timestamp(1_796_000_000_000 + timestamp + id);
        if let Some(v) = &value {
            record = record.payload(v);
        }
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
}

/// `(id, v, _cdc_lsn)` of every row, by id, as DuckDB reads the table.
fn rows(job: &Job, table: &str) -> Vec<(i64, String, i64)> {
    let mut rows: Vec<_> = read_rows(
        "duckdb",
        Catalog::Seaweed,
        &format!("{}_topics.{table}", job.name),
    )
    .iter()
    .map(|r| {
        (
            r["id"].as_i64().unwrap(),
            r["v"].as_str().unwrap().to_owned(),
            r["_cdc_lsn"].as_i64().expect("_cdc_lsn"),
        )
    })
    .collect();
    rows.sort();
    rows
}

#[test]
fn one_keys_changes_on_two_partitions_are_ordered_by_the_source_log_not_by_arrival() {
    let topic = unique_name("cdc_order");
    let table = "orders";
    create_topic(&topic, 2);
    let job = change_job(&topic, table, "");
    // Key 1: partition 1's update (300) is the last; partition 0's later
    // offset (200) and newer timestamp must not win.
    // Key 2: deleted at 400 on partition 0, then its Kafka tombstone; the
    // update of partition 1 (350) came before the delete.
    // Key 3: an update on partition 1 (500) after its delete (450).
    produce(
        &topic,
        &[
            (0, 1, event("c", 1, 100, "a")),
            (1, 1, event("u", 1, 300, "c")),
            (0, 1, event("u", 1, 200, "b")),
            (0, 2, event("c", 2, 110, "x")),
            (1, 2, event("u", 2, 350, "y")),
            (0, 2, event("d", 2, 400, "")),
            (0, 2, None),
            (0, 3, event("c", 3, 120, "p")),
            (0, 3, event("d", 3, 450, "")),
            (0, 3, None),
            (1, 3, event("c", 3, 500, "q")),
        ],
    );
    job.sync();
    assert_eq!(
        rows(&job, table),
        [(1, "c".to_owned(), 300), (3, "q".to_owned(), 500)]
    );
    // The next sync meets the committed rows: partition 0's update of key
    // 1 at 250 is older than the table's row (300, partition 1), the one
    // at 310 newer; key 4's create stands; key 3's delete at 460 on
    // partition 0 is older than its row (500, partition 1).
    produce(
        &topic,
        &[
            (0, 1, event("u", 1, 250, "stale")),
            (0, 3, event("d", 3, 460, "")),
            (0, 3, None),
            (0, 4, event("c", 4, 600, "n")),
        ],
    );
    job.sync();
    assert_eq!(
        rows(&job, table),
        [
            (1, "c".to_owned(), 300),
            (3, "q".to_owned(), 500),
            (4, "n".to_owned(), 600)
        ]
    );
    produce(&topic, &[(0, 1, event("u", 1, 310, "d"))]);
    job.sync();
    assert_eq!(rows(&job, table)[0], (1, "d".to_owned(), 310));
}
