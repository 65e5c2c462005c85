//! A PostgreSQL table's Debezium change stream written in Avro through the
//! schema registry (keys and values: the test bed's registry Avro converter,
//! which writes Confluent's wire format and schema conventions), synced with
//! `change_events = "debezium"` and the value format the registry's subject
//! decides: after each round of inserts, updates of rows whose large values
//! are not sent again, deletes, primary-key changes and a new column, the
//! Iceberg table equals `SELECT * FROM` the source table, value for value
//! with exact types (DuckDB each round, PyIceberg at the end).

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;

use crate::cdc_debezium::source_rows;
use crate::support::cdc::{change_job_with, copy_rows, psql, topic_partitions, Connector};
use crate::support::{fetch_values, plaintext, wait_until, watermarks};
use crate::testbed::{get, unique_name};

const PARTITIONS: i32 = 3;

/// Debezium's placeholder for a value it did not send.
const PLACEHOLDER: &[u8] = b"__debezium_unavailable_value";

/// The large columns, as the readers print them.
const BIG: &str = ", big, replace(encode(bb, 'base64'), E'\\n', '') as bb";
const BIG_AND_NOTE: &str = ", big, replace(encode(bb, 'base64'), E'\\n', '') as bb, note";

/// The connector settings that write keys and values in Avro through the
/// test bed's registry.
fn avro_converters(registry: &str) -> Vec<(&'static str, String)> {
    let converter = "topicberg.testbed.RegistryAvroConverter".to_owned();
    vec![
        ("key.converter", converter.clone()),
        ("key.converter.schema.registry.url", registry.to_owned()),
        ("value.converter", converter),
        ("value.converter.schema.registry.url", registry.to_owned()),
    ]
}

/// Waits until `topic` holds `total` messages (a partition whose leader
/// is not known yet counts none).
fn wait_for_messages(topic: &str, total: i64) {
    let partitions = topic_partitions(topic, Duration::from_secs(60));
    let consumer: BaseConsumer = plaintext().client_config().create().expect("consumer");
    let high = |p: i32| {
        consumer
            .fetch_watermarks(topic, p, Duration::from_secs(5))
            .map_or(0, |(_, high)| high)
    };
    wait_until(
        &format!("{total} messages in {topic}"),
        Duration::from_secs(60),
        || (0..partitions).map(high).sum::<i64>() >= total,
    );
}

#[test]
fn an_avro_debezium_stream_through_the_registry_keeps_the_table_equal_to_the_source() {
    let table = unique_name("cdc_avro");
    psql(&format!(
        "create table {table} (id int primary key, name text, amount numeric(12,3),
           at timestamptz, d date, u uuid, j jsonb, b bytea, tags text[], big text, bb bytea)"
    ));
    let row = |id: i64, name: &str| {
        format!(
            "({id}, '{name}', {id}.5{id}, '2026-12-07 01:02:03.{id:06}+02', '2026-12-{day:02}',
              'a0eebc99-9c0b-4ef8-bb6d-6bb9bd3800{id:02}', '{{\"id\": {id}}}',
              '\\x00{id:02}ff', array['{name}', null],
              (select string_agg(md5('{name}{id}' || g), '') from generate_series(1, 300) g),
              (select string_agg(decode(md5(g || 'b{id}'), 'hex'), '') from generate_series(1, 600) g))",
            day = id % 28 + 1
        )
    };
    let insert = |ids: std::ops::Range<i64>, name: &str| {
        let rows: Vec<String> = ids.map(|i| row(i, name)).collect();
        format!("insert into {table} values {}", rows.join(", "))
    };
    psql(&insert(1..3, "snap"));
    let registry = get("TESTBED_SCHEMA_REGISTRY_URL");
    let converters = avro_converters(&registry);
    let extra: Vec<(&str, &str)> = converters.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let connector = Connector::start_with(&[&table], PARTITIONS, true, &extra);
    let topic = connector.topic(&table);
    let source = format!("schema_registry_url = \"{registry}\"\n");
    let job = change_job_with(&topic, &table, &source, "");

    // Avro in the registry's wire format: byte 0, then the schema id.
    wait_for_messages(&topic, 2);
    let first: Vec<Vec<u8>> = (0..PARTITIONS)
        .filter(|p| watermarks(&plaintext(), &topic, *p).1 > 0)
        .flat_map(|p| fetch_values(&topic, p, 1))
        .collect();
    assert!(first.iter().all(|v| v.first() == Some(&0) && v.len() > 5));

    let out = job.run("discover", &["--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        found[0]["value_format"],
        "avro",
        "{found:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let columns: Vec<String> = found[0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}", c[0].as_str().unwrap(), c[1].as_str().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            "id int",
            "name string",
            "amount decimal(12,3)",
            "at timestamptz",
            "d date",
            "u uuid",
            "j string",
            "b binary",
            "tags list<string>",
            "big string",
            "bb binary"
        ]
    );

    // (statement, messages it adds).
    let rounds: [Vec<(String, i64)>; 3] = [
        vec![(insert(3..8, "new"), 5)],
        vec![
            // `big` is not sent again (REPLICA IDENTITY DEFAULT): kept.
            (
                format!("update {table} set name = 'renamed', amount = -0.001 where id = 3"),
                1,
            ),
            (format!("delete from {table} where id = 4"), 2),
            // A primary-key change of a row whose `big` is not sent.
            (format!("update {table} set id = 50 where id = 5"), 3),
            (
                format!("update {table} set tags = null, j = null, b = null where id = 1"),
                1,
            ),
        ],
        vec![
            (
                format!("alter table {table} add column note varchar(20)"),
                0,
            ),
            (
                format!("update {table} set note = 'noted' where id in (2, 6)"),
                2,
            ),
            (insert(8..10, "late"), 2),
        ],
    ];
    let mut total = 2;
    for (round, statements) in rounds.iter().enumerate() {
        for (sql, messages) in statements {
            psql(sql);
            total += messages;
        }
        wait_for_messages(&topic, total);
        job.sync();
        if round == 1 {
            // The updates did not send the large values again.
            let sent = (0..PARTITIONS).flat_map(|p| {
                let high = watermarks(&plaintext(), &topic, p).1;
                fetch_values(&topic, p, high as usize)
            });
            let placeholders = sent
                .filter(|v| v.windows(PLACEHOLDER.len()).any(|w| w == PLACEHOLDER))
                .count();
            assert!(
                placeholders >= 2,
                "{placeholders} events with the placeholder"
            );
        }
        let more = if round == 2 { BIG_AND_NOTE } else { BIG };
        let expected = source_rows(&table, more);
        assert_eq!(
            copy_rows("duckdb", &job, &table).expect("DuckDB reads the table"),
            expected,
            "round {round}: the table differs from the source"
        );
    }
    let expected = source_rows(&table, BIG_AND_NOTE);
    assert_eq!(expected.len(), 8);
    assert_eq!(
        copy_rows("pyiceberg", &job, &table),
        Some(expected),
        "PyIceberg reads another table than the source"
    );
    drop(connector);
}
