//! Upsert mode within one sync: which message wins for each key.
//!
//! Every decoded batch of an upsert table is held until the drain ends (the
//! sync's new rows; the table's old rows stay in the table and are found
//! through the key index). For each `_olake_id` (the hash of the dedup key)
//! the latest message wins: within a partition the higher offset; across
//! partitions the later message timestamp, then the higher partition, then
//! the higher offset, so the result never depends on thread timing. A
//! tombstone (on a `_kafka_key` stream) competes like any message and, when
//! it wins, deletes the key.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_select::filter::filter_record_batch;

/// A message's place in the stream, for ordering versions of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Message timestamp, microseconds (or milliseconds: only compared).
    pub timestamp: i64,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

impl Version {
    /// Whether `self` supersedes `other` (see the module docs).
    pub fn supersedes(&self, other: &Version) -> bool {
        if self.partition == other.partition {
            return self.offset > other.offset;
        }
        (self.timestamp, self.partition, self.offset)
            > (other.timestamp, other.partition, other.offset)
    }
}

/// Where the winning version of a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Row `row` of held batch `batch`.
    Row {
        /// Index into the held batches.
        batch: u32,
        /// Row within that batch.
        row: u32,
    },
    /// A tombstone: the key is deleted.
    Tombstone,
}

/// A 16-byte `_olake_id`.
pub type KeyHash = [u8; 16];

/// Parses the 32 hex digits of an `_olake_id`.
pub fn parse_key_hash(hex: &str) -> Option<KeyHash> {
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, chunk) in hex.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = (digit(chunk[0])? * 16 + digit(chunk[1])?) as u8;
    }
    Some(out)
}

/// The held batches of one upsert table and the winner per key.
#[derive(Default)]
pub struct UpsertBuffer {
    batches: Vec<RecordBatch>,
    winners: HashMap<KeyHash, (Version, Slot)>,
}

impl UpsertBuffer {
    /// Takes a decoded batch (with the metadata columns) and updates the
    /// winners.
    pub fn add_batch(&mut self, batch: RecordBatch) -> Result<(), String> {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| format!("the batch has no {name} column"))
        };
        let ids = column("_olake_id")?.as_string::<i32>().clone();
        let partitions = column("_kafka_partition")?
            .as_primitive::<Int32Type>()
            .clone();
        let offsets = column("_kafka_offset")?.as_primitive::<Int64Type>().clone();
        let timestamps = column("_kafka_timestamp")?
            .as_primitive::<TimestampMicrosecondType>()
            .clone();
        let index = self.batches.len() as u32;
        for row in 0..batch.num_rows() {
            let key = parse_key_hash(ids.value(row))
                .ok_or_else(|| format!("bad _olake_id {:?}", ids.value(row)))?;
            let version = Version {
                timestamp: if timestamps.is_null(row) {
                    i64::MIN
                } else {
                    timestamps.value(row)
                },
                partition: partitions.value(row),
                offset: offsets.value(row),
            };
            self.offer(
                key,
                version,
                Slot::Row {
                    batch: index,
                    row: row as u32,
                },
            );
        }
        self.batches.push(batch);
        Ok(())
    }

    /// Makes every held batch fit `schema` (the table's, after this sync
    /// added or widened columns): missing columns null, `int` widened.
    pub fn conform_to(&mut self, schema: &arrow_schema::SchemaRef) -> Result<(), String> {
        for batch in &mut self.batches {
            if batch.schema() != *schema {
                *batch = topicberg_iceberg::conform::conform(batch, schema)?;
            }
        }
        Ok(())
    }

    /// Takes a tombstone for `key` (timestamp in microseconds).
    pub fn add_tombstone(&mut self, key: KeyHash, version: Version) {
        self.offer(key, version, Slot::Tombstone);
    }

    fn offer(&mut self, key: KeyHash, version: Version, slot: Slot) {
        match self.winners.get_mut(&key) {
            Some(current) if !version.supersedes(&current.0) => {}
            Some(current) => *current = (version, slot),
            None => {
                self.winners.insert(key, (version, slot));
            }
        }
    }

    /// Number of distinct keys seen.
    pub fn keys(&self) -> usize {
        self.winners.len()
    }

    /// Keys whose winner is a tombstone.
    pub fn deleted_keys(&self) -> Vec<KeyHash> {
        let mut keys: Vec<KeyHash> = self
            .winners
            .iter()
            .filter(|(_, (_, s))| *s == Slot::Tombstone)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Keys whose winner is a row, in the order the rows will be written.
    pub fn written_keys(&self) -> Vec<KeyHash> {
        let mut rows: Vec<(u32, u32, KeyHash)> = self
            .winners
            .iter()
            .filter_map(|(k, (_, s))| match s {
                Slot::Row { batch, row } => Some((*batch, *row, *k)),
                Slot::Tombstone => None,
            })
            .collect();
        rows.sort_unstable();
        rows.into_iter().map(|(_, _, k)| k).collect()
    }

    /// The winning rows, batch by batch in arrival order, with `_op_type`
    /// set by `op_type(key)` ("c" for a first-seen key, "u" for a repeat).
    /// The rows come out in the order of [`Self::written_keys`].
    pub fn winning_batches(
        &self,
        mut op_type: impl FnMut(&KeyHash) -> &'static str,
    ) -> Result<Vec<RecordBatch>, String> {
        let mut keep: Vec<Vec<bool>> = self
            .batches
            .iter()
            .map(|b| vec![false; b.num_rows()])
            .collect();
        for (_, slot) in self.winners.values() {
            if let Slot::Row { batch, row } = slot {
                keep[*batch as usize][*row as usize] = true;
            }
        }
        let mut out = Vec::new();
        for (batch, mask) in self.batches.iter().zip(keep) {
            if !mask.iter().any(|k| *k) {
                continue;
            }
            let filtered =
                filter_record_batch(batch, &BooleanArray::from(mask)).map_err(|e| e.to_string())?;
            let ids = filtered
                .column_by_name("_olake_id")
                .expect("checked in add_batch")
                .as_string::<i32>();
            let ops: StringArray = (0..filtered.num_rows())
                .map(|r| {
                    Some(op_type(
                        &parse_key_hash(ids.value(r)).expect("checked in add_batch"),
                    ))
                })
                .collect();
            let position = filtered
                .schema()
                .index_of("_op_type")
                .map_err(|e| e.to_string())?;
            let mut columns = filtered.columns().to_vec();
            columns[position] = std::sync::Arc::new(ops);
            out.push(RecordBatch::try_new(filtered.schema(), columns).map_err(|e| e.to_string())?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array, TimestampMicrosecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};

    use super::*;

    fn key(n: u8) -> String {
        format!("{:032x}", n)
    }

    fn batch(rows: &[(u8, i32, i64, i64)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("_olake_id", DataType::Utf8, true),
            Field::new("_kafka_partition", DataType::Int32, true),
            Field::new("_kafka_offset", DataType::Int64, true),
            Field::new(
                "_kafka_timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("_op_type", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.0 as i64).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    rows.iter().map(|r| key(r.0)).collect::<Vec<_>>(),
                )),
                Arc::new(Int32Array::from(
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                )),
                Arc::new(
                    TimestampMicrosecondArray::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(vec!["c"; rows.len()])),
            ],
        )
        .unwrap()
    }

    fn ids_and_ops(batches: &[RecordBatch]) -> Vec<(i64, i64, String)> {
        batches
            .iter()
            .flat_map(|b| {
                let ids = b.column(0).as_primitive::<Int64Type>().clone();
                let offsets = b.column(3).as_primitive::<Int64Type>().clone();
                let ops = b.column(5).as_string::<i32>().clone();
                (0..b.num_rows())
                    .map(move |r| (ids.value(r), offsets.value(r), ops.value(r).to_string()))
            })
            .collect()
    }

    #[test]
    fn within_a_partition_the_higher_offset_wins_even_with_an_older_timestamp() {
        let mut buffer = UpsertBuffer::default();
        buffer
            .add_batch(batch(&[(1, 0, 5, 900), (1, 0, 6, 100)]))
            .unwrap();
        let rows = ids_and_ops(&buffer.winning_batches(|_| "c").unwrap());
        assert_eq!(rows, vec![(1, 6, "c".into())]);
    }

    #[test]
    fn across_partitions_the_later_timestamp_then_partition_then_offset_wins() {
        let mut buffer = UpsertBuffer::default();
        buffer
            .add_batch(batch(&[(1, 2, 50, 100), (1, 0, 7, 200)]))
            .unwrap();
        buffer
            .add_batch(batch(&[(2, 0, 8, 300), (2, 1, 3, 300)]))
            .unwrap();
        let rows = ids_and_ops(&buffer.winning_batches(|_| "u").unwrap());
        assert_eq!(rows, vec![(1, 7, "u".into()), (2, 3, "u".into())]);
    }

    #[test]
    fn a_later_tombstone_deletes_and_an_earlier_one_loses() {
        let mut buffer = UpsertBuffer::default();
        buffer
            .add_batch(batch(&[(1, 0, 1, 10), (2, 0, 2, 10)]))
            .unwrap();
        buffer.add_tombstone(
            parse_key_hash(&key(1)).unwrap(),
            Version {
                timestamp: 20,
                partition: 0,
                offset: 3,
            },
        );
        buffer.add_tombstone(
            parse_key_hash(&key(2)).unwrap(),
            Version {
                timestamp: 5,
                partition: 0,
                offset: 0,
            },
        );
        assert_eq!(
            buffer.deleted_keys(),
            vec![parse_key_hash(&key(1)).unwrap()]
        );
        let rows = ids_and_ops(&buffer.winning_batches(|_| "c").unwrap());
        assert_eq!(rows, vec![(2, 2, "c".into())]);
        assert_eq!(
            buffer.written_keys(),
            vec![parse_key_hash(&key(2)).unwrap()]
        );
    }

    #[test]
    fn op_type_comes_from_the_caller_per_key() {
        let mut buffer = UpsertBuffer::default();
        buffer
            .add_batch(batch(&[(1, 0, 1, 10), (2, 0, 2, 10)]))
            .unwrap();
        let old = parse_key_hash(&key(2)).unwrap();
        let rows = ids_and_ops(
            &buffer
                .winning_batches(|k| if *k == old { "u" } else { "c" })
                .unwrap(),
        );
        assert_eq!(rows, vec![(1, 1, "c".into()), (2, 2, "u".into())]);
    }

    #[test]
    fn key_hash_parses_32_hex_digits_only() {
        assert_eq!(
            parse_key_hash("000102030405060708090a0b0c0d0e0f").unwrap()[15],
            15
        );
        assert!(parse_key_hash("xyz").is_none());
        assert!(parse_key_hash("000102030405060708090a0b0c0d0eZZ").is_none());
    }
}
