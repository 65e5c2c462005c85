//! Field names and values that used to vanish or change without a word:
//! fields named like metadata columns, names differing only in case,
//! integers beyond 64 bits, and the column limit (docs/src/explanation/columns.md,
//! "Column names", "Integers beyond 64 bits", "The column limit").

use serde_json::Value;

use crate::support::{create_topic, produce, read_lines, table_report, Catalog, Job};
use crate::testbed::unique_name;

fn by_offset(lines: &str) -> Vec<Value> {
    let mut rows: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("reader line is JSON"))
        .collect();
    rows.sort_by_key(|r| r["_kafka_offset"].as_i64().unwrap());
    rows
}

#[test]
fn sync_keeps_metadata_named_case_colliding_and_wide_integer_fields_under_documented_names() {
    let topic = unique_name("names");
    create_topic(&topic, 1);
    let messages = [
        r#"{"id":1,"ID":"one","Id":true,"_kafka_offset":"mine-0","_op_type":"u","big":18446744073709551616,"exact":9007199254740993}"#,
        r#"{"id":2,"ID":"two","Id":false,"_kafka_offset":"mine-1","_op_type":"d","big":123456789012345678901234567890,"exact":1}"#,
    ];
    let pairs: Vec<_> = messages
        .iter()
        .map(|m| ("k".to_owned(), (*m).to_owned()))
        .collect();
    produce(&topic, &pairs);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let table = job.table(&topic);

    // discover says where each field goes.
    let out = job.run("discover", &["--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The CLI's discover names the topics its pattern leaves out (the
    // cluster holds other tests' topics).
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("Skipping topic ") && said.contains("does not match topic_pattern"),
        "{said}"
    );
    let renamed = &found[0]["renamed"];
    for pair in [
        ["ID", "ID__2"],
        ["Id", "Id__3"],
        ["_kafka_offset", "_kafka_offset_payload"],
        ["_op_type", "_op_type_payload"],
    ] {
        assert!(
            renamed
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(pair)),
            "{pair:?} in {renamed}"
        );
    }
    let columns = found[0]["columns"].to_string();
    assert!(columns.contains(r#"["big","string"]"#), "{columns}");
    assert!(columns.contains(r#"["exact","long"]"#), "{columns}");

    // The first sync creates the table; the log says it once.
    let log = job.scratch_file("first.log");
    let report = job.sync_logged(&log);
    assert_eq!(table_report(&report, &table)["status"], "committed");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.matches("payload fields stored under renamed columns")
            .count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("_kafka_offset -> _kafka_offset_payload"),
        "{text}"
    );

    // A later sync adds another spelling and another metadata name.
    produce(
        &topic,
        &[(
            "k".to_owned(),
            r#"{"id":3,"iD":"three","_olake_id":"mine-2","exact":-5}"#.to_owned(),
        )],
    );
    let report = job.sync();
    let t = table_report(&report, &table);
    assert_eq!(t["status"], "committed", "{t}");
    let changes = t["schema_changes"].to_string();
    assert!(
        changes.contains("added column iD__4 (string) for field iD"),
        "{changes}"
    );
    assert!(
        changes.contains("added column _olake_id_payload (string) for field _olake_id"),
        "{changes}"
    );

    // Every reader sees every value under its documented name.
    let duckdb = read_lines("duckdb", Catalog::Seaweed, &table);
    let rows = by_offset(&duckdb);
    assert_eq!(rows.len(), 3, "{duckdb}");
    assert_eq!(rows[0]["id"], 1);
    assert_eq!(rows[0]["ID__2"], "one");
    assert_eq!(rows[0]["Id__3"], true);
    assert_eq!(rows[1]["Id__3"], false);
    assert_eq!(rows[0]["_kafka_offset"], 0);
    assert_eq!(rows[0]["_kafka_offset_payload"], "mine-0");
    assert_eq!(rows[1]["_kafka_offset_payload"], "mine-1");
    assert_eq!(rows[0]["_op_type"], "c");
    assert_eq!(rows[0]["_op_type_payload"], "u");
    // Integers beyond 64 bits keep every digit (a json column: their text).
    assert_eq!(rows[0]["big"], "18446744073709551616");
    assert_eq!(rows[1]["big"], "123456789012345678901234567890");
    // 2^53 + 1 in a long column, not rounded.
    assert_eq!(rows[0]["exact"].as_i64(), Some(9_007_199_254_740_993));
    assert_eq!(rows[2]["iD__4"], "three");
    assert_eq!(rows[2]["_olake_id_payload"], "mine-2");
    assert_ne!(rows[2]["_olake_id"], "mine-2");
    assert!(rows[0]["iD__4"].is_null());
    for engine in ["spark", "pyiceberg"] {
        assert_eq!(
            read_lines(engine, Catalog::Seaweed, &table),
            duckdb,
            "{engine} differs from DuckDB on {table}"
        );
    }

    // An integer a long column cannot hold is an invalid message, never a
    // rounded value: with the default `on_invalid = "fail"` the sync stops.
    produce(
        &topic,
        &[(
            "k".to_owned(),
            r#"{"id":4,"exact":9223372036854775808}"#.to_owned(),
        )],
    );
    let out = job.run("sync", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted = format!(
        r#"{topic}[0]@3: field "exact": expected long, found integer 9223372036854775808, which is out of range"#
    );
    assert!(text.contains(&wanted), "wanted {wanted:?} in:\n{text}");
    assert_eq!(
        by_offset(&read_lines("duckdb", Catalog::Seaweed, &table)).len(),
        3
    );

    // With `on_invalid = "dlq"` the same message goes to the dead-letter
    // table, the error naming its field, and the sync goes on.
    job.append(&format!(
        "[[streams]]\ntopic = \"{topic}\"\non_invalid = \"dlq\"\n"
    ));
    let report = job.sync();
    let t = table_report(&report, &table);
    assert_eq!(t["status"], "committed", "{t}");
    assert_eq!(t["dead_letter_records"], 1, "{t}");
    let dead = by_offset(&read_lines(
        "duckdb",
        Catalog::Seaweed,
        &format!("{table}__dlq"),
    ));
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["_kafka_offset"], 3);
    assert_eq!(dead[0]["_error_field"], "exact");
    assert!(
        dead[0]["_error"].as_str().unwrap().contains(&wanted),
        "{}",
        dead[0]
    );
}

#[test]
fn sync_column_limit_refuses_a_new_table_and_a_message_naming_offset_and_setting() {
    let small = unique_name("limit");
    let wide = unique_name("limit_wide");
    create_topic(&small, 1);
    create_topic(&wide, 1);
    let job = Job::new(
        Catalog::Seaweed,
        &[&small, &wide],
        "",
        "[sync]\nmax_columns = 12\n",
    );
    produce(&small, &[("k".into(), r#"{"a":1,"b":2}"#.into())]);
    // 5 payload + 8 metadata columns: one too many for a new table.
    produce(
        &wide,
        &[
            ("k".into(), r#"{"a":1}"#.into()),
            ("k".into(), r#"{"a":1,"b":2,"c":3,"d":4,"e":5}"#.into()),
        ],
    );
    let out = job.run("sync", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted = format!("{wide}[0]@1: the table would have 13 columns (metadata included), more than sync.max_columns = 12; raise `max_columns` under [sync]");
    assert!(text.contains(&wanted), "wanted {wanted:?} in:\n{text}");
    // The other table committed.
    assert_eq!(
        by_offset(&read_lines("duckdb", Catalog::Seaweed, &job.table(&small))).len(),
        1
    );

    // Mid-sync: a message whose new fields pass the limit is invalid.
    produce(
        &small,
        &[
            ("k".into(), r#"{"a":2,"c":3}"#.into()),
            ("k".into(), r#"{"a":3,"d":4,"e":5,"f":6}"#.into()),
        ],
    );
    let out = job.run("sync", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted = format!(
        "{small}[0]@2: field \"d\": the table would have 14 columns (metadata included), more than sync.max_columns = 12"
    );
    assert!(text.contains(&wanted), "wanted {wanted:?} in:\n{text}");
    assert_eq!(
        by_offset(&read_lines("duckdb", Catalog::Seaweed, &job.table(&small))).len(),
        1,
        "nothing of the failed table is committed"
    );
}
