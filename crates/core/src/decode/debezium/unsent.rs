//! The values a batch's change events did not send (Debezium's placeholder
//! for an unchanged TOASTed column), written as nulls and listed for the
//! sync ([`super::super::DecoderOptions::keep_unsent`]).

use std::sync::Arc;

use crate::decode::UnsentValue;

/// The unsent values of the batch being decoded and of the one finished
/// last, by (row, column name), rows ascending; and the rows whose event
/// moved the row from another key (its `_olake_id` bytes).
#[derive(Debug, Default)]
pub(crate) struct Unsent {
    cells: Vec<Cell>,
    moved_from: Vec<Moved>,
    finished: (Vec<Cell>, Vec<Moved>),
}

/// A row and the name of its column that was not sent.
type Cell = (u32, Arc<str>);

/// A row and the `_olake_id` bytes of the key it moved from.
type Moved = (u32, [u8; 16]);

impl Unsent {
    /// Column `column` of row `row` was not sent (a column these
    /// decoders may not have yet: the sync's table may).
    pub(crate) fn push(&mut self, row: usize, column: &str) {
        self.cells.push((row as u32, Arc::from(column)));
    }

    /// Whether row `row` (the last) has unsent values.
    pub(crate) fn in_row(&self, row: usize) -> bool {
        self.cells.last().is_some_and(|(r, _)| *r as usize == row)
    }

    /// Row `row` moved from the key whose `_olake_id` bytes are `key`.
    pub(crate) fn moved(&mut self, row: usize, key: [u8; 16]) {
        self.moved_from.push((row as u32, key));
    }

    /// Forgets the rows from `rows` on (rolled back).
    pub(crate) fn truncate(&mut self, rows: usize) {
        while self.cells.last().is_some_and(|(r, _)| *r as usize >= rows) {
            self.cells.pop();
        }
        while self
            .moved_from
            .last()
            .is_some_and(|(r, _)| *r as usize >= rows)
        {
            self.moved_from.pop();
        }
    }

    /// The batch is finished: its values wait for [`Self::take`].
    pub(crate) fn finish(&mut self) {
        self.finished = (
            std::mem::take(&mut self.cells),
            std::mem::take(&mut self.moved_from),
        );
    }

    /// The finished batch's unsent values.
    pub(crate) fn take(&mut self) -> Vec<UnsentValue> {
        let (cells, moved) = std::mem::take(&mut self.finished);
        if cells.is_empty() {
            return Vec::new();
        }
        let moved_from = |row: u32| {
            moved
                .binary_search_by_key(&row, |(r, _)| *r)
                .ok()
                .map(|i| moved[i].1)
        };
        cells
            .into_iter()
            .map(|(row, column)| UnsentValue {
                row,
                column,
                moved_from: moved_from(row),
            })
            .collect()
    }
}
