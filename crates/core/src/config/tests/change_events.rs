//! `[[streams]] change_events`, `on_truncate` and `order_by`: what they need, and what they resolve to.

use super::*;
use crate::decode::ALL_KEY_FIELDS;
use crate::registry::ValueFormat;
use crate::{DedupKeys, Job};

#[test]
fn a_debezium_stream_needs_json_or_avro_values_and_appends_without_soft_deletes() {
    // Append: a log of every event.
    load(&stream("change_events = \"debezium\"\n")).unwrap();
    one_problem(
        &stream("change_events = \"debezium\"\nsoft_deletes = true\n"),
        "streams[0].soft_deletes",
        "keeps every event",
    );
    let found = problems(&stream(
        "mode = \"upsert\"\nchange_events = \"debezium\"\nvalue_format = \"protobuf\"\n",
    ));
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("streams[0].value_format: ")
                && p.contains("protobuf values are not supported yet")),
        "{found:#?}"
    );
    let found = problems(&stream(
        "mode = \"upsert\"\nchange_events = \"debezium\"\nvalue_format = \"avro\"\n",
    ));
    assert!(
        !found.iter().any(|p| p.contains("not supported yet")),
        "{found:#?}"
    );
    // Payload fields may be the key (deletes read it from `before`).
    load(&stream(
        "mode = \"upsert\"\nchange_events = \"debezium\"\ndedup_keys = [\"id\"]\n",
    ))
    .unwrap();
    // No dedup_keys needed.
    load(&stream("mode = \"upsert\"\nchange_events = \"debezium\"\n")).unwrap();
}

#[test]
fn a_debezium_stream_keys_on_every_field_of_the_message_key_unless_told() {
    let resolve = |body: &str| {
        let config = load(&stream(body)).unwrap();
        Job::resolve(&config).unwrap().table_for("orders")
    };
    let t = resolve("mode = \"upsert\"\nchange_events = \"debezium\"\n");
    assert_eq!(t.change_events, ChangeEvents::Debezium);
    assert_eq!(t.value_format, Some(ValueFormat::Json));
    assert_eq!(
        t.upsert().unwrap().keys,
        DedupKeys::Columns(vec![ALL_KEY_FIELDS.to_owned()])
    );
    let named = resolve(
        "mode = \"upsert\"\nchange_events = \"debezium\"\ndedup_keys = [\"_kafka_key.id\"]\n",
    );
    assert_eq!(
        named.upsert().unwrap().keys,
        DedupKeys::Columns(vec!["_kafka_key.id".to_owned()])
    );
    let plain = resolve("mode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    assert_eq!(plain.change_events, ChangeEvents::None);
}

#[test]
fn on_truncate_and_soft_deletes_are_for_change_event_streams_and_resolve_as_written() {
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"id\"]\non_truncate = \"fail\"\n"),
        "streams[0].on_truncate",
        "set change_events = \"debezium\"",
    );
    let resolve = |body: &str| {
        let config = load(&stream(body)).unwrap();
        Job::resolve(&config).unwrap().table_for("orders")
    };
    let cdc = "mode = \"upsert\"\nchange_events = \"debezium\"\n";
    assert_eq!(
        resolve(cdc).on_truncate,
        crate::config::OnTruncate::EmptyTable
    );
    let failing = resolve(&format!("{cdc}on_truncate = \"fail\"\n"));
    assert_eq!(failing.on_truncate, crate::config::OnTruncate::Fail);
    assert!(load(&stream(&format!("{cdc}on_truncate = \"skip\"\n"))).is_err());
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"id\"]\nsoft_deletes = true\n"),
        "streams[0].soft_deletes",
        "change events only",
    );
    assert!(resolve(&format!("{cdc}soft_deletes = true\n")).soft_deletes);
}

#[test]
fn order_by_names_a_payload_field_of_a_plain_upsert_stream() {
    let upsert = "mode = \"upsert\"\ndedup_keys = [\"id\"]\n";
    one_problem(
        &stream("order_by = \"version\"\n"),
        "streams[0].order_by",
        "set mode = \"upsert\"",
    );
    one_problem(
        &stream("mode = \"upsert\"\nchange_events = \"debezium\"\norder_by = \"version\"\n"),
        "streams[0].order_by",
        "_cdc_lsn",
    );
    one_problem(
        &stream(&format!("{upsert}order_by = \"_kafka_offset\"\n")),
        "streams[0].order_by",
        "is a metadata column",
    );
    one_problem(
        &stream(&format!(
            "{upsert}columns = [\"id\"]\norder_by = \"version\"\n"
        )),
        "streams[0].order_by",
        "not in columns",
    );
    let config = load(&stream(&format!("{upsert}order_by = \"version\"\n"))).unwrap();
    let table = Job::resolve(&config).unwrap().table_for("orders");
    assert_eq!(table.upsert().unwrap().order_by.as_deref(), Some("version"));
}

#[test]
fn a_table_template_routes_and_is_checked_when_the_file_is_read() {
    let config = load(&stream("table = \"{source.db}_{source.table}\"\n")).unwrap();
    let settings = Job::resolve(&config).unwrap().table_for("orders");
    let route = settings.route.expect("a template");
    assert_eq!(route.text(), "{source.db}_{source.table}");
    assert!(route.reads_value());
    // A plain name is no template.
    let config = load(&stream("table = \"orders_v1\"\n")).unwrap();
    assert!(Job::resolve(&config)
        .unwrap()
        .table_for("orders")
        .route
        .is_none());
    one_problem(
        &stream("table = \"{source.table\"\n"),
        "streams[0].table",
        "without its pair",
    );
    one_problem(
        &stream("table = \"t_{a..b}\"\n"),
        "streams[0].table",
        "is not a placeholder",
    );
    // Fields of the value are JSON's only; headers route any format.
    let found = problems(&stream("table = \"{kind}\"\nvalue_format = \"avro\"\n"));
    assert!(
        found.iter().any(|p| p.contains("JSON values only")),
        "{found:#?}"
    );
}
