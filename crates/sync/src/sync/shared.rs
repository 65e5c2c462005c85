//! Several topics into one table (both `[[streams]]` entries name it; see
//! `topicberg_core::shared_table` for when they may): each topic is its
//! own [`TableState`], planned, drained and committed as any table, with
//! its own offsets in the table. The first to create the table makes it;
//! the others load it (`stages::create_tables`), and a later commit that
//! finds the table moved by an earlier one rebuilds on it, as a commit
//! does after any other writer.

use super::failure::TableFailure;
use super::table::{Stage, TableState};

/// Among workers, a table that several topics write fails (the handing
/// over of files between workers is per topic).
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
