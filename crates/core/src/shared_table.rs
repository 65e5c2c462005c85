//! Several topics into one table: when two streams may write one table.
//!
//! Two topics write one table only when both `[[streams]]` entries name it
//! (`table = "..."`): two topic names that merely sanitise to one table
//! name (`orders.v1`, `orders-v1`) are a mistake, refused as before. The
//! entries must agree on everything that shapes the table or the meaning
//! of its rows: mode, dedup keys, delete format, `order_by`, format
//! version, `partition_by`, `sort_by`, `columns`, `change_events`,
//! `soft_deletes`, `kafka_headers`. A change stream's truncate would empty
//! the rows of every topic, so shared change-event tables need
//! `on_truncate = "fail"`. Per-topic settings (`on_invalid`,
//! `allow_data_loss`, `value_format`, `key_format`) may differ.
//!
//! Each topic keeps its own offsets in the table (its
//! `topicberg.offsets.<topic>` property), so each topic's messages land
//! once; its sync commits one snapshot per topic.

use std::collections::BTreeMap;

use crate::config::{ChangeEvents, OnTruncate};
use crate::job::{Job, TableMode, TableSettings};

/// Topics among `topics` that would write the same table (e.g.
/// `orders.v1` and `orders-v1`) when they may not, one message per clash,
/// naming the fix.
pub fn table_conflicts<'a>(job: &Job, topics: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: BTreeMap<String, TableSettings> = BTreeMap::new();
    let mut problems = Vec::new();
    for topic in topics {
        let settings = job.table_for(topic);
        if settings.route.is_some() {
            // Its tables are named by the messages, each checked then.
            continue;
        }
        match seen.get(&settings.table) {
            Some(first) if first.topic != topic => {
                problems.extend(sharing_problem(first, &settings));
            }
            Some(_) => {}
            None => {
                seen.insert(settings.table.clone(), settings);
            }
        }
    }
    problems
}

/// Why `first` and `second` (two topics' settings naming one table) may
/// not write it together, naming the fix; `None` when they may.
pub fn sharing_problem(first: &TableSettings, second: &TableSettings) -> Option<String> {
    let (a, b, table) = (&first.topic, &second.topic, &second.table);
    if !(first.table_named && second.table_named) {
        return Some(format!(
            "topics \"{a}\" and \"{b}\" would both write table \"{table}\"; add a [[streams]] \
             entry with a distinct `table = \"...\"` for one of them (or name the table in both \
             entries to write it from both topics)"
        ));
    }
    let differing = differing_settings(first, second);
    if !differing.is_empty() {
        return Some(format!(
            "topics \"{a}\" and \"{b}\" both write table \"{table}\" but their streams differ in \
             {}: make them equal in both entries, or name distinct tables",
            differing.join(", ")
        ));
    }
    let truncates = first.change_events != ChangeEvents::None
        && [first, second]
            .iter()
            .any(|s| s.on_truncate == OnTruncate::EmptyTable);
    truncates.then(|| {
        format!(
            "topics \"{a}\" and \"{b}\" both write table \"{table}\": a truncate of one source \
             would empty the other's rows too; set on_truncate = \"fail\" in both entries"
        )
    })
}

/// The settings that shape a table or its rows in which `a` and `b`
/// differ, by their `[[streams]]` names.
fn differing_settings(a: &TableSettings, b: &TableSettings) -> Vec<&'static str> {
    let (upsert_a, upsert_b) = (upsert_of(&a.mode), upsert_of(&b.mode));
    // The upsert settings are compared when both are upserts.
    let both = upsert_a.zip(upsert_b);
    let checks = [
        ("mode", upsert_a.is_some() != upsert_b.is_some()),
        ("dedup_keys", both.is_some_and(|(x, y)| x.keys != y.keys)),
        (
            "delete_format",
            both.is_some_and(|(x, y)| x.delete_format != y.delete_format),
        ),
        (
            "order_by",
            both.is_some_and(|(x, y)| x.order_by != y.order_by),
        ),
        ("format_version", a.format_version != b.format_version),
        ("partition_by", a.partition_by != b.partition_by),
        ("sort_by", a.sort_by != b.sort_by),
        ("columns", a.columns != b.columns),
        ("change_events", a.change_events != b.change_events),
        ("soft_deletes", a.soft_deletes != b.soft_deletes),
        ("kafka_headers", a.kafka_headers != b.kafka_headers),
    ];
    checks
        .into_iter()
        .filter(|(_, differs)| *differs)
        .map(|(name, _)| name)
        .collect()
}

fn upsert_of(mode: &TableMode) -> Option<&crate::job::Upsert> {
    match mode {
        TableMode::Upsert(u) => Some(u),
        TableMode::Append => None,
    }
}

#[cfg(test)]
mod tests {
    use super::table_conflicts;
    use crate::{Job, JobConfig};

    fn conflicts(streams: &str) -> Vec<String> {
        let text = format!(
            "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\ntopic_pattern = \".*\"\n{streams}"
        );
        let config = JobConfig::from_toml_str(&text, |_| None).unwrap();
        table_conflicts(
            &Job::resolve(&config).unwrap(),
            ["db1.orders", "db2.orders"],
        )
    }

    const UPSERT: &str = "mode = \"upsert\"\ndedup_keys = [\"id\"]\ntable = \"orders\"\n";

    #[test]
    fn two_streams_that_name_one_table_with_equal_settings_may_write_it() {
        let both =
            format!("[[streams]]\ntopic = \"db1.orders\"\n{UPSERT}[[streams]]\ntopic = \"db2.orders\"\n{UPSERT}on_invalid = \"skip\"\n");
        assert_eq!(conflicts(&both), Vec::<String>::new());
    }

    #[test]
    fn topics_whose_names_sanitise_to_one_table_are_named() {
        let text =
            "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\ntopic_pattern = \".*\"\n";
        let job = Job::resolve(&JobConfig::from_toml_str(text, |_| None).unwrap()).unwrap();
        assert!(table_conflicts(&job, ["orders", "customers", "orders"]).is_empty());
        let clash = table_conflicts(&job, ["orders.v1", "orders-v1"]);
        assert_eq!(clash.len(), 1);
        assert!(
            clash[0].contains("\"orders.v1\" and \"orders-v1\""),
            "{clash:?}"
        );
    }

    #[test]
    fn names_that_only_sanitise_alike_or_differing_settings_are_refused_naming_them() {
        // Defaults: db1_orders and db2_orders, no clash.
        assert!(conflicts("").is_empty());
        let one_named = format!(
            "[[streams]]\ntopic = \"db1.orders\"\n{UPSERT}[[streams]]\ntopic = \"db2.orders\"\n\
             mode = \"upsert\"\ndedup_keys = [\"id\"]\n"
        );
        assert!(
            conflicts(&one_named).is_empty(),
            "db2_orders is another table"
        );
        let renamed = "[[streams]]\ntopic = \"db1.orders\"\ntable = \"db2_orders\"\n";
        let found = conflicts(renamed);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("distinct `table"), "{found:?}");

        let differing = format!(
            "[[streams]]\ntopic = \"db1.orders\"\n{UPSERT}[[streams]]\ntopic = \"db2.orders\"\n\
             table = \"orders\"\npartition_by = [\"day(_kafka_timestamp)\"]\n"
        );
        let found = conflicts(&differing);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("differ in mode, partition_by:"),
            "{found:?}"
        );
    }

    #[test]
    fn shared_change_event_tables_must_fail_at_a_truncate() {
        let cdc = "mode = \"upsert\"\nchange_events = \"debezium\"\ntable = \"orders\"\n";
        let both = format!(
            "[[streams]]\ntopic = \"db1.orders\"\n{cdc}[[streams]]\ntopic = \"db2.orders\"\n{cdc}"
        );
        let found = conflicts(&both);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("on_truncate = \"fail\""), "{found:?}");
        let failing = both.replace(cdc, &format!("{cdc}on_truncate = \"fail\"\n"));
        assert_eq!(conflicts(&failing), Vec::<String>::new());
    }
}
