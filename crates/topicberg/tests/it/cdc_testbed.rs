//! The test bed's change data capture source works end to end: a table in
//! its PostgreSQL, Debezium's connector registered on its Kafka Connect
//! worker, and every insert, update and delete in the table's topic.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::cdc::{psql, query_json, read_changes, topic_partitions, Change, Connector};
use crate::testbed::unique_name;

const PARTITIONS: i32 = 3;

/// The changes of one key, in the order of its partition.
fn of_id(changes: &[Change], id: i64) -> Vec<&Change> {
    changes
        .iter()
        .filter(|c| c.key()["id"] == json!(id))
        .collect()
}

#[test]
fn debezium_writes_a_postgres_tables_changes_to_its_topic() {
    let table = unique_name("cdc_table");
    psql(&format!(
        "create table {table} (id int primary key, name text)"
    ));
    let connector = Connector::start(&[&table], PARTITIONS, true);
    let topic = connector.topic(&table);

    psql(&format!(
        "insert into {table} values (1, 'one'), (2, 'two'), (3, 'three')"
    ));
    psql(&format!("update {table} set name = 'TWO' where id = 2"));
    psql(&format!("delete from {table} where id = 3"));
    assert_eq!(
        query_json(&format!("select id, name from {table} order by id")),
        vec![
            json!({"id": 1, "name": "one"}),
            json!({"id": 2, "name": "TWO"})
        ]
    );

    // 3 inserts, 1 update, 1 delete and its tombstone.
    let changes = read_changes(&topic, Duration::from_secs(60), |c| c.len() >= 6);
    let count = |op: Option<&str>| changes.iter().filter(|c| c.op() == op).count();
    assert_eq!(
        count(Some("c")) + count(Some("r")),
        3,
        "inserts: {changes:#?}"
    );
    assert_eq!(count(Some("u")), 1, "updates: {changes:#?}");
    assert_eq!(count(Some("d")), 1, "deletes: {changes:#?}");
    assert_eq!(count(None), 1, "tombstones: {changes:#?}");
    assert_eq!(changes.len(), 6, "{changes:#?}");
    // Connect created the topic with the connector's partition count.
    assert_eq!(
        topic_partitions(&topic, Duration::from_secs(10)),
        PARTITIONS
    );

    // Schemas enabled: keys and values carry their Connect schema.
    let first = &changes[0];
    assert_eq!(first.key["schema"]["type"], "struct", "{first:#?}");
    assert_eq!(
        first.value.as_ref().unwrap()["schema"]["name"],
        format!("{}.Envelope", topic),
        "{first:#?}"
    );

    // Per key, in partition order. REPLICA IDENTITY DEFAULT: an update has no
    // `before`, a delete's `before` has the key columns only.
    let after = |c: &Change| c.event().unwrap()["after"].clone();
    let row_1 = of_id(&changes, 1);
    assert_eq!(row_1.len(), 1, "{row_1:#?}");
    assert_eq!(after(row_1[0]), json!({"id": 1, "name": "one"}));
    let row_2 = of_id(&changes, 2);
    assert_eq!(
        row_2.iter().map(|c| c.op()).collect::<Vec<_>>(),
        [Some("c"), Some("u")],
        "{row_2:#?}"
    );
    assert_eq!(after(row_2[1]), json!({"id": 2, "name": "TWO"}));
    assert_eq!(row_2[1].event().unwrap()["before"], Value::Null);
    let row_3 = of_id(&changes, 3);
    assert_eq!(
        row_3.iter().map(|c| c.op()).collect::<Vec<_>>(),
        [Some("c"), Some("d"), None],
        "{row_3:#?}"
    );
    let deleted = row_3[1].event().unwrap();
    assert_eq!(deleted["before"], json!({"id": 3, "name": null}));
    assert_eq!(deleted["after"], Value::Null);
    assert_eq!(deleted["source"]["table"], json!(table));
    assert!(row_3.iter().all(|c| c.partition == row_3[0].partition));

    let slot = connector.slot.clone();
    drop(connector);
    assert_eq!(
        psql(&format!(
            "select count(*) from pg_replication_slots where slot_name = '{slot}'"
        )),
        "0",
        "the connector's slot is dropped with it"
    );
    psql(&format!("drop table {table}"));
}
