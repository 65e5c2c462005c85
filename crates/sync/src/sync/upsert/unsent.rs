//! Values a change event did not send (Debezium's placeholder for an
//! unchanged TOASTed column, written as a null by the decoder): for a
//! key's winning row, which earlier version of the key fills each one.
//!
//! The value is the key's as the last version before the winner that sent
//! it has it: a held row of this sync, else the table's row of the key.
//! A delete (or a truncate) in between leaves nothing to fill from: the
//! row was written again since, and an insert sends every value, so that
//! happens only for a key Debezium never sent whole (the commit fails,
//! naming the column).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::entries::Entry;
use super::{KeyHash, Slot, Version};

/// The sync's unsent values: (held row, column name), rows ascending,
/// and the rows whose event moved them from another key.
#[derive(Debug, Default)]
pub(super) struct UnsentValues {
    cells: Vec<(u32, Arc<str>)>,
    moved_from: HashMap<u32, KeyHash>,
    /// The versions of every key a row moved from, kept as the winners are
    /// found ([`UnsentValues::keep_history`]).
    histories: HashMap<KeyHash, Vec<Entry>>,
}

impl UnsentValues {
    /// Adds the unsent values of a batch whose first held row is `first`.
    pub(super) fn extend(&mut self, first: u32, values: Vec<topicberg_core::UnsentValue>) {
        for value in values {
            let row = first + value.row;
            if let Some(key) = value.moved_from {
                self.moved_from.insert(row, key);
            }
            self.cells.push((row, value.column));
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The keys rows moved from.
    pub(super) fn moved_keys(&self) -> HashSet<KeyHash> {
        self.moved_from.values().copied().collect()
    }

    /// Keeps `group`, the versions of a key a row moved from.
    pub(super) fn keep_history(&mut self, key: KeyHash, group: &[Entry]) {
        self.histories.insert(key, group.to_vec());
    }

    /// The unsent values of held row `row`.
    fn of(&self, row: u32) -> &[(u32, Arc<str>)] {
        let start = self.cells.partition_point(|(r, _)| *r < row);
        let end = self.cells.partition_point(|(r, _)| *r <= row);
        &self.cells[start..end]
    }

    fn sent(&self, row: u32, column: &str) -> bool {
        !self.of(row).iter().any(|(_, c)| &**c == column)
    }

    /// Where `column`'s value of key `from` as it was before `at` (the
    /// create of a primary-key change) comes from. A key without versions
    /// in this sync gives the table's row of it.
    pub(super) fn moved_value(
        &self,
        from: &KeyHash,
        at: Version,
        column: &str,
        truncate: Option<Version>,
    ) -> FillFrom {
        match self.histories.get(from) {
            Some(group) => self.donor(group, at, column, truncate, false),
            None if truncate.is_some() => FillFrom::Nowhere,
            None => FillFrom::Table,
        }
    }

    /// Where `column`'s value before `at` comes from among `group`'s
    /// versions (see the module docs); `own`: `group` is the key's own.
    /// For the key a row moved from (`own` false), the move's delete (at
    /// `at`'s place in the source's log) and its Kafka tombstone (no place)
    /// are the move itself, not deletes that hide the versions before them.
    fn donor(
        &self,
        group: &[Entry],
        at: Version,
        column: &str,
        truncate: Option<Version>,
        own: bool,
    ) -> FillFrom {
        let earlier = |e: &&Entry| precedes(e.version, at);
        let is_row = |e: &&Entry| e.slot() != Slot::Tombstone;
        let hides = |e: &&Entry| {
            let place = e.version.timestamp;
            own || (place != i64::MIN && place != at.timestamp)
        };
        let reset = latest(
            group
                .iter()
                .filter(earlier)
                .filter(|e| !is_row(e))
                .filter(hides),
        );
        let after_reset = |e: &&Entry| reset.is_none_or(|r| precedes(r.version, e.version));
        let kept = |e: &&Entry| truncate.is_none_or(|t| !t.supersedes(&e.version));
        let rows = || {
            group
                .iter()
                .filter(earlier)
                .filter(is_row)
                .filter(after_reset)
                .filter(kept)
        };
        if let Some(e) = latest(rows().filter(|e| self.sent(e.row, column))) {
            return FillFrom::Held(e.row);
        }
        // No earlier version sent it: the first one of the row (or `at`
        // itself) may have moved from another key.
        let first = earliest(rows()).map_or(at, |e| e.version);
        let first_row = group.iter().find(|e| e.version == first).map(|e| e.row);
        if let Some(from) = first_row.and_then(|r| self.moved_from.get(&r)) {
            return FillFrom::Moved {
                from: *from,
                at: first,
            };
        }
        if reset.is_some() || truncate.is_some() {
            FillFrom::Nowhere
        } else {
            FillFrom::Table
        }
    }
}

/// Where a winning row's unsent value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillFrom {
    /// The held row of an earlier version of the key, which sent it.
    Held(u32),
    /// The table's row of the key (no earlier version of this sync sent
    /// it, and none deleted the key).
    Table,
    /// The value of key `from` before `at` (its create): the row moved
    /// from that key by a primary-key change
    /// ([`UnsentValues::moved_value`]).
    Moved {
        /// The key the row moved from.
        from: KeyHash,
        /// The version of the event that moved it.
        at: Version,
    },
    /// Nowhere: the key was deleted or truncated since.
    Nowhere,
}

/// One unsent value of a winning row and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fill {
    /// The column.
    pub column: Arc<str>,
    /// Its source.
    pub from: FillFrom,
}

/// Whether `a` came before `b` among one key's versions: within a
/// partition by offset, across partitions as [`Version::supersedes`]
/// orders them.
fn precedes(a: Version, b: Version) -> bool {
    if a.partition == b.partition {
        a.offset < b.offset
    } else {
        b.supersedes(&a)
    }
}

/// The latest of `entries` by [`precedes`].
fn latest<'a>(entries: impl Iterator<Item = &'a Entry>) -> Option<&'a Entry> {
    entries.fold(None, |best, e| match best {
        Some(b) if !precedes(b.version, e.version) => Some(b),
        _ => Some(e),
    })
}

/// The earliest of `entries` by [`precedes`].
fn earliest<'a>(entries: impl Iterator<Item = &'a Entry>) -> Option<&'a Entry> {
    entries.fold(None, |best, e| match best {
        Some(b) if !precedes(e.version, b.version) => Some(b),
        _ => Some(e),
    })
}

/// The fills of `winner`'s unsent values, from the key's entries `group`
/// (the winner among them) and the sync's truncate, into `out` (emptied
/// first; left empty when the winner sent every value).
pub(super) fn fills(
    group: &[Entry],
    winner: &Entry,
    unsent: &UnsentValues,
    truncate: Option<Version>,
    out: &mut Vec<Fill>,
) {
    out.clear();
    let Slot::Row(row) = winner.slot() else {
        return;
    };
    for (_, column) in unsent.of(row) {
        let from = unsent.donor(group, winner.version, column, truncate, true);
        out.push(Fill {
            column: Arc::clone(column),
            from,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: i32, offset: i64, timestamp: i64, row: Option<u32>) -> Entry {
        Entry {
            key: [3; 16],
            version: Version {
                timestamp,
                partition,
                offset,
            },
            row: Entry::row_or_tombstone(row.map_or(Slot::Tombstone, Slot::Row)),
        }
    }

    fn unsent(cells: &[(u32, &str)]) -> UnsentValues {
        let mut values = UnsentValues::default();
        for (row, column) in cells {
            let value = topicberg_core::UnsentValue {
                row: 0,
                column: Arc::from(*column),
                moved_from: None,
            };
            values.extend(*row, vec![value]);
        }
        values
    }

    fn fills_of(group: &[Entry], winner: usize, unsent: &UnsentValues) -> Vec<(String, FillFrom)> {
        let mut out = Vec::new();
        fills(group, &group[winner], unsent, None, &mut out);
        out.into_iter()
            .map(|f| (f.column.to_string(), f.from))
            .collect()
    }

    #[test]
    fn each_unsent_value_comes_from_the_last_earlier_version_that_sent_it() {
        // Rows 0..3 of one partition; row 1 did not send `big`, row 2
        // (the winner) neither `big` nor `j`.
        let group = [
            at(0, 10, 1, Some(0)),
            at(0, 11, 2, Some(1)),
            at(0, 12, 3, Some(2)),
        ];
        let values = unsent(&[(1, "big"), (2, "big"), (2, "j")]);
        assert_eq!(
            fills_of(&group, 2, &values),
            [
                ("big".into(), FillFrom::Held(0)),
                ("j".into(), FillFrom::Held(1))
            ]
        );
        // The winner sent everything: nothing to fill.
        assert_eq!(fills_of(&group, 0, &values), []);
    }

    #[test]
    fn without_an_earlier_version_that_sent_it_the_value_is_the_tables() {
        let group = [at(0, 11, 2, Some(5)), at(0, 12, 3, Some(6))];
        let values = unsent(&[(5, "big"), (6, "big")]);
        assert_eq!(
            fills_of(&group, 1, &values),
            [("big".into(), FillFrom::Table)]
        );
        let mut out = Vec::new();
        let truncate = Version {
            timestamp: 0,
            partition: 0,
            offset: 1,
        };
        fills(&group, &group[1], &values, Some(truncate), &mut out);
        assert_eq!(
            out[0].from,
            FillFrom::Nowhere,
            "the table's row was truncated"
        );
    }

    #[test]
    fn a_delete_before_the_winner_hides_every_version_before_it() {
        // Arrival order is not the key's order: partition 1's delete
        // (position 25) falls between row 0 (20) and row 1 (30).
        let group = [
            at(0, 5, 30, Some(1)),
            at(1, 9, 25, None),
            at(0, 4, 20, Some(0)),
        ];
        let values = unsent(&[(1, "big")]);
        assert_eq!(
            fills_of(&group, 0, &values),
            [("big".into(), FillFrom::Nowhere)]
        );
        // Before the delete (position 35 > 30) it does not count.
        let group = [
            at(0, 5, 30, Some(1)),
            at(1, 9, 35, None),
            at(0, 4, 20, Some(0)),
        ];
        assert_eq!(
            fills_of(&group, 0, &values),
            [("big".into(), FillFrom::Held(0))]
        );
    }

    #[test]
    fn a_row_moved_from_another_key_takes_that_keys_value_before_the_move() {
        let mut values = unsent(&[(7, "big"), (8, "big")]);
        values.moved_from.insert(7, [9; 16]);
        // The new key: its create (row 7, moved from key 9) and an update
        // (row 8), neither sending `big`.
        let group = [at(1, 3, 50, Some(7)), at(1, 4, 60, Some(8))];
        let create = group[0].version;
        assert_eq!(
            fills_of(&group, 1, &values),
            [(
                "big".into(),
                FillFrom::Moved {
                    from: [9; 16],
                    at: create
                }
            )]
        );
        // Key 9 before the move: a row that sent it (row 2), its delete
        // at the move (a tombstone, not a reset here), and a later
        // re-insert that does not count.
        let old = [
            at(0, 1, 40, Some(2)),
            at(0, 2, 50, None),
            at(0, 5, 70, Some(3)),
        ];
        values.keep_history([9; 16], &old);
        assert_eq!(
            values.moved_value(&[9; 16], create, "big", None),
            FillFrom::Held(2)
        );
        // Without a version of key 9 in the sync: its row in the table.
        assert_eq!(
            values.moved_value(&[4; 16], create, "big", None),
            FillFrom::Table
        );
    }

    #[test]
    fn a_delete_of_the_key_a_row_moved_from_hides_what_came_before_it() {
        // Key 1: an insert that sent `big` (row 0, position 10), its delete
        // (20), a create moved from key 2 (row 1, 30) and the move away to
        // key 3 (its delete at 40, and the Kafka tombstone after it).
        let mut values = unsent(&[(1, "big")]);
        values.moved_from.insert(1, [2; 16]);
        let key1 = [
            at(0, 1, 10, Some(0)),
            at(0, 2, 20, None),
            at(0, 4, 30, Some(1)),
            at(0, 6, 40, None),
            at(0, 7, i64::MIN, None),
        ];
        values.keep_history([1; 16], &key1);
        let to_key3 = Version {
            timestamp: 40,
            partition: 1,
            offset: 9,
        };
        assert_eq!(
            values.moved_value(&[1; 16], to_key3, "big", None),
            FillFrom::Moved {
                from: [2; 16],
                at: key1[2].version
            },
            "not the insert before the delete"
        );
    }

    #[test]
    fn a_later_version_never_fills_an_earlier_winner() {
        // Partition 1's row (position 40) is later than the winner of
        // partition 0 would be; as the donor of row 0 only earlier ones count.
        let group = [at(0, 4, 20, Some(0)), at(1, 2, 40, Some(1))];
        let values = unsent(&[(0, "big")]);
        assert_eq!(
            fills_of(&group, 0, &values),
            [("big".into(), FillFrom::Table)]
        );
    }
}
