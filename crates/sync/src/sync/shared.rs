//! Several topics into one table (both `[[streams]]` entries name it; see
//! `topicberg_core::shared_table` for when they may): each topic is its
//! own [`TableState`], planned, drained and committed as any table, with
//! its own offsets in the table. The first to create the table makes it;
//! the others load it (`stages::create_tables`), and a later commit that
//! finds the table moved by an earlier one rebuilds on it, as a commit
//! does after any other writer.

use super::failure::TableFailure;
use super::table::{Stage, TableState};

/// In a continuous sync (a follower, alone or among workers), a table
/// that several topics write fails for all but the first topic: the
/// handing over of files between workers is per topic.
pub(super) fn fail_among_workers(tables: &mut [TableState]) {
    for i in 0..tables.len() {
        let first = tables[..i]
            .iter()
            .find(|t| t.table == tables[i].table && t.topic() != tables[i].topic())
            .map(|t| t.topic().to_owned());
        let Some(first) = first else { continue };
        let state = &mut tables[i];
        let cause = TableFailure::SharedAmongWorkers {
            table: state.table.clone(),
            first,
            second: state.topic().to_owned(),
        };
        state.fail(Stage::Plan, cause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(topic: &str, table: &str) -> TableState {
        let config = topicberg_core::JobConfig::from_toml_str(
            "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\ntopic_pattern = \".*\"\n",
            |_| None,
        )
        .unwrap();
        let job = topicberg_core::Job::resolve(&config).unwrap();
        TableState::new(job.table_for(topic), table.to_owned(), Vec::new())
    }

    #[test]
    fn in_a_continuous_sync_the_second_topic_of_a_table_fails_naming_both() {
        let mut tables = [
            state("db1.orders", "ns.orders"),
            state("db2.orders", "ns.orders"),
            state("db3.other", "ns.other"),
        ];
        fail_among_workers(&mut tables);
        let failed: Vec<bool> = tables.iter().map(TableState::failed).collect();
        assert_eq!(failed, [false, true, false]);
        let error = tables[1].report.error.clone().unwrap();
        assert!(
            error.contains("table ns.orders is written by topics db1.orders and db2.orders")
                && error.contains("scheduled syncs only"),
            "{error}"
        );
    }
}
