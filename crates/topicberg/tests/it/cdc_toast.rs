//! Values over 8 KB (TOASTed by PostgreSQL: text, jsonb, bytea) in rows
//! updated in other columns only. With the table's default `REPLICA
//! IDENTITY`, Debezium sends its placeholder for the unchanged values: the
//! table keeps the key's previous value (from the table's row, or from an
//! earlier event of the same sync), and the placeholder never reaches the
//! table. With `REPLICA IDENTITY FULL` every event carries every value.
//! An event whose key has no earlier row fails the sync, naming topic,
//! partition, offset and field, and the row's next whole event puts it
//! right.

use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

use crate::support::cdc::{change_job, copy_rows, psql, query_json, read_changes, Connector};
use crate::support::{create_topic, plaintext};
use crate::testbed::unique_name;

/// A large value of row `i` (md5 chains do not compress: stored out of
/// line, over 8 KB), `salt` making a new one.
fn large(i: &str, salt: &str) -> String {
    format!(
        "(select string_agg(md5({i}::text || g::text || '{salt}'), '') from generate_series(1, 300) g)"
    )
}

/// Inserts rows `ids` with large values in `big`, `j` and `b`.
fn insert_large(name: &str, ids: &str) {
    psql(&format!(
        "insert into {name} select i, 0, {big},
           (select jsonb_agg(md5(g::text || i::text)) from generate_series(1, 300) g),
           (select string_agg(decode(md5(g::text || 'b' || i::text), 'hex'), '') from generate_series(1, 600) g)
         from generate_series({ids}) i",
        big = large("i", "")
    ));
}

/// A table with large values in rows 1 to 3.
fn large_values_table(name: &str, full: bool) {
    psql(&format!(
        "create table {name} (id int primary key, n int, big text, j jsonb, b bytea)"
    ));
    if full {
        psql(&format!("alter table {name} replica identity full"));
    }
    insert_large(name, "1, 3");
}

fn source_rows(name: &str) -> Vec<Value> {
    query_json(&format!(
        "select id, n, big, j::text as j,
                replace(encode(b, 'base64'), E'\\n', '') as b
         from {name} order by id"
    ))
}

/// Changes of the first round (10 events): every row updated in `n`
/// only, row 2's `big` changed before, a new row 4 updated after its
/// insert, row 3 moved to key 5 (a primary-key change: a delete, its
/// tombstone and a create, which does not send the large values either).
fn first_round(t: &str) {
    psql(&format!(
        "update {t} set big = {} where id = 2",
        large("2", "x")
    ));
    psql(&format!("update {t} set n = n + 1"));
    psql(&format!("update {t} set n = n + 1 where id = 3"));
    insert_large(t, "4, 4");
    psql(&format!("update {t} set n = n + 5 where id = 4"));
    psql(&format!("update {t} set id = 5 where id = 3"));
}

/// Changes of the second round (11 events): row 1 of the table moved to
/// key 6 and on to key 8, row 4 moved to key 7 and updated, row 2 updated.
fn second_round(t: &str) {
    psql(&format!("update {t} set id = 6 where id = 1"));
    psql(&format!("update {t} set id = 8 where id = 6"));
    psql(&format!("update {t} set id = 7 where id = 4"));
    psql(&format!("update {t} set n = n + 1 where id in (2, 7)"));
}

#[test]
fn large_unchanged_values_keep_their_previous_value() {
    let (default, full) = (unique_name("cdc_toast"), unique_name("cdc_toast_full"));
    large_values_table(&default, false);
    large_values_table(&full, true);
    let sizes = query_json(&format!(
        "select length(big) as big, length(j::text) as j, length(b) as b from {full} where id = 1"
    ));
    for column in ["big", "j", "b"] {
        assert!(sizes[0][column].as_i64().unwrap() > 8_192, "{sizes:?}");
    }
    let connector = Connector::start(&[&default, &full], 2, true);
    let (default_topic, full_topic) = (connector.topic(&default), connector.topic(&full));
    let jobs = [
        change_job(&default_topic, &default, ""),
        change_job(&full_topic, &full, ""),
    ];
    // The snapshot, then two rounds of changes, a sync after each.
    let mut events = 3;
    for round in 0..3 {
        if round == 1 {
            for t in [&default, &full] {
                first_round(t);
            }
            events += 10;
        }
        if round == 2 {
            for t in [&default, &full] {
                second_round(t);
            }
            events += 11;
        }
        for topic in [&default_topic, &full_topic] {
            read_changes(topic, Duration::from_secs(60), |c| c.len() >= events);
        }
        for (job, t) in jobs.iter().zip([&default, &full]) {
            let report = job.sync();
            let copy = copy_rows("duckdb", job, t).expect("DuckDB reads the table");
            assert_eq!(copy, source_rows(t), "round {round}: {report}");
        }
    }
    // The placeholder was sent: the default identity's updates lack the
    // values the table has.
    let changes = read_changes(&default_topic, Duration::from_secs(60), |c| {
        c.len() >= events
    });
    let placeholders = changes
        .iter()
        .filter(|c| {
            c.event()
                .is_some_and(|e| e.to_string().contains("__debezium_unavailable_value"))
        })
        .count();
    assert!(
        placeholders >= 5,
        "{placeholders} events with the placeholder"
    );
    let copy = copy_rows("pyiceberg", &jobs[0], &default).expect("PyIceberg reads the table");
    assert_eq!(copy, source_rows(&default));
    drop(connector);
}

/// A change event of row `id` as Debezium writes it without the schema,
/// `big` its value or the placeholder.
fn event(op: &str, id: i64, n: i64, big: &str) -> String {
    json!({
        "before": null, "after": {"id": id, "n": n, "big": big}, "op": op, "ts_ms": 1,
        "source": {"connector": "postgresql", "lsn": 100 + n, "ts_ms": 1},
    })
    .to_string()
}

fn produce(topic: &str, messages: &[(i64, String)]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (id, value) in messages {
        let key = json!({ "id": id }).to_string();
        producer
            .send(BaseRecord::to(topic).key(&key).payload(value))
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
}

#[test]
fn an_unsent_value_without_an_earlier_row_fails_naming_it_until_the_rows_next_change() {
    let topic = unique_name("cdc_toast_none");
    create_topic(&topic, 1);
    let unsent = "__debezium_unavailable_value";
    produce(
        &topic,
        &[
            (1, event("c", 1, 0, "first")),
            (1, event("u", 1, 1, unsent)),
            (9, event("u", 9, 2, unsent)),
        ],
    );
    let job = change_job(&topic, "t", "");
    let stderr = job.sync_failing();
    assert!(
        stderr.contains(&format!("{topic}[0]@2"))
            && stderr.contains("field \"big\"")
            && stderr.contains("REPLICA IDENTITY FULL"),
        "{stderr}"
    );
    assert_eq!(
        copy_rows("duckdb", &job, "t").unwrap_or_default(),
        Vec::<Value>::new()
    );
    // Row 9's next change carries every value: it replaces the event.
    produce(
        &topic,
        &[
            (9, event("u", 9, 3, "whole")),
            (1, event("u", 1, 4, unsent)),
        ],
    );
    job.sync();
    let rows = copy_rows("duckdb", &job, "t").unwrap();
    assert_eq!(
        rows,
        [
            json!({"id": 1, "n": 4, "big": "first"}),
            json!({"id": 9, "n": 3, "big": "whole"})
        ]
    );
}
