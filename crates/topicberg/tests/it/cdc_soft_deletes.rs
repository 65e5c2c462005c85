//! `soft_deletes = true`: a deleted source row stays in the table, marked
//! `_cdc_op = "d"`, with the values the delete's `before` holds (the whole
//! row under `REPLICA IDENTITY FULL`); the Kafka tombstone after it is
//! passed; a re-inserted key is a live row again.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::cdc::{change_job, psql, query_json, read_changes, Connector};
use crate::support::{read_rows, Catalog};
use crate::testbed::unique_name;

/// `id -> {name, _cdc_op}` of the Iceberg table.
fn table_rows(job: &crate::support::Job, table: &str) -> BTreeMap<i64, Value> {
    let name = format!("{}_topics.{table}", job.name);
    let mut rows = BTreeMap::new();
    for row in read_rows("duckdb", Catalog::Seaweed, &name) {
        let id = row["id"].as_i64().expect("id");
        let kept = json!({"name": row["name"], "op": row["_cdc_op"]});
        assert!(rows.insert(id, kept).is_none(), "id {id} twice");
    }
    rows
}

#[test]
fn soft_deletes_keep_deleted_rows_marked_with_their_last_values() {
    let table = unique_name("cdc_soft");
    psql(&format!(
        "create table {table} (id int primary key, name text);\
         alter table {table} replica identity full;\
         insert into {table} select i, 'n' || i from generate_series(1, 4) i"
    ));
    let connector = Connector::start(&[&table], 2, true);
    let topic = connector.topic(&table);
    let job = change_job(&topic, &table, "soft_deletes = true\n");
    let mut total = 4;
    let mut deleted: BTreeMap<i64, String> = BTreeMap::new();
    let rounds: [&[(String, usize)]; 2] = [
        &[
            (format!("update {table} set name = 'two' where id = 2"), 1),
            (format!("delete from {table} where id in (2, 3)"), 4),
        ],
        &[
            (format!("insert into {table} values (3, 'three again')"), 1),
            (format!("delete from {table} where id = 4"), 2),
        ],
    ];
    read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    job.sync();
    for (round, statements) in rounds.iter().enumerate() {
        for (sql, messages) in *statements {
            psql(sql);
            total += messages;
        }
        read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
        job.sync();
        // Expected: the source's rows live, the deleted ones marked with
        // their last values (a re-inserted id is live again).
        match round {
            0 => {
                deleted.insert(2, "two".into());
                deleted.insert(3, "n3".into());
            }
            _ => {
                deleted.remove(&3);
                deleted.insert(4, "n4".into());
            }
        }
        let mut want: BTreeMap<i64, Value> = BTreeMap::new();
        for row in query_json(&format!("select id, name from {table} order by id")) {
            let id = row["id"].as_i64().unwrap();
            want.insert(id, json!({"name": row["name"], "op": "live"}));
        }
        for (id, name) in &deleted {
            want.insert(*id, json!({"name": name, "op": "d"}));
        }
        let got: BTreeMap<i64, Value> = table_rows(&job, &table)
            .into_iter()
            .map(|(id, mut row)| {
                if row["op"] != "d" {
                    row["op"] = json!("live");
                }
                (id, row)
            })
            .collect();
        assert_eq!(got, want, "round {round}");
    }
    drop(connector);
}
