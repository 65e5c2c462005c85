//! Values over 8 KB (TOASTed by PostgreSQL: text, jsonb, bytea) in rows
//! updated in other columns only. With the table's default `REPLICA
//! IDENTITY`, Debezium sends its placeholder for the unchanged values: the
//! sync fails naming the field and commits no row, so the placeholder never
//! reaches the table; with `REPLICA IDENTITY FULL` set then and the failed
//! event passed to the dead-letter table, the next change puts it right.
//! With `REPLICA IDENTITY FULL` every event carries every value and the
//! table equals the source, large values included.

use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{change_job, copy_rows, psql, query_json, read_changes, Connector};
use crate::testbed::unique_name;

/// A table with large values in rows 1 and 2, then an update of `n` only.
fn large_values_table(name: &str, full: bool) {
    psql(&format!(
        "create table {name} (id int primary key, n int, big text, j jsonb, b bytea)"
    ));
    if full {
        psql(&format!("alter table {name} replica identity full"));
    }
    // md5 chains do not compress: stored out of line (TOAST), over 8 KB.
    psql(&format!(
        "insert into {name} select i, 0,
           (select string_agg(md5(i::text || g::text), '') from generate_series(1, 300) g),
           (select jsonb_agg(md5(g::text || i::text)) from generate_series(1, 300) g),
           (select string_agg(decode(md5(g::text || 'b' || i::text), 'hex'), '') from generate_series(1, 600) g)
         from generate_series(1, 2) i"
    ));
}

fn source_rows(name: &str) -> Vec<Value> {
    query_json(&format!(
        "select id, n, big, j::text as j,
                replace(encode(b, 'base64'), E'\\n', '') as b
         from {name} order by id"
    ))
}

#[test]
fn large_unchanged_values_reach_the_table_only_as_themselves() {
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
    for t in [&default, &full] {
        psql(&format!("update {t} set n = n + 1 where id = 1"));
    }
    let (default_topic, full_topic) = (connector.topic(&default), connector.topic(&full));
    for topic in [&default_topic, &full_topic] {
        read_changes(topic, Duration::from_secs(60), |c| c.len() >= 3);
    }

    // REPLICA IDENTITY FULL: the update carries the large values.
    let full_job = change_job(&full_topic, &full, "");
    full_job.sync();
    let copy = copy_rows("duckdb", &full_job, &full).expect("DuckDB reads the table");
    assert_eq!(copy, source_rows(&full));

    // The default identity: the placeholder fails the sync, naming the
    // field, and no row is committed.
    let failing = change_job(&default_topic, &default, "");
    let stderr = failing.sync_failing();
    assert!(
        stderr.contains("__debezium_unavailable_value")
            && stderr.contains("field \"big\"")
            && stderr.contains("REPLICA IDENTITY FULL")
            && stderr.contains(&format!("{default_topic}[")),
        "{stderr}"
    );
    let rows = copy_rows("duckdb", &failing, &default).unwrap_or_default();
    assert_eq!(rows, Vec::<Value>::new());

    // The way out: REPLICA IDENTITY FULL, and the failed event passed to
    // the dead-letter table; the row's next change carries all of it.
    psql(&format!("alter table {default} replica identity full"));
    psql(&format!("update {default} set n = n + 1 where id = 1"));
    read_changes(&default_topic, Duration::from_secs(60), |c| c.len() >= 4);
    let mut text = std::fs::read_to_string(&failing.path).unwrap();
    text.push_str("on_invalid = \"dlq\"\n");
    std::fs::write(&failing.path, text).unwrap();
    let report = failing.sync();
    let copy = copy_rows("duckdb", &failing, &default).expect("DuckDB reads the table");
    assert_eq!(copy, source_rows(&default), "{report}");
    drop(connector);
}
