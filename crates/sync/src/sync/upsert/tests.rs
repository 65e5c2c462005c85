//! The upsert buffer: winners per key, held rows, row sets.
use arrow_array::{Int32Array, Int64Array, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use super::*;

fn key(n: u8) -> String {
    format!("{:032x}", n)
}

fn buffer() -> UpsertBuffer {
    UpsertBuffer::new(&std::env::temp_dir().join("topicberg-upsert-tests"), None).unwrap()
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

/// (id, offset, op) of the winning rows, with "u" for keys in
/// `existing`, and the keys whose winner is a tombstone.
fn resolve(buffer: &mut UpsertBuffer, existing: &[u8]) -> (Vec<(i64, i64, String)>, Vec<KeyHash>) {
    let existing: Vec<KeyHash> = existing
        .iter()
        .map(|n| parse_key_hash(&key(*n)).unwrap())
        .collect();
    let mut winners = RowSet::new(buffer.rows());
    let mut updates = RowSet::new(buffer.rows());
    let mut deleted = Vec::new();
    buffer
        .for_each_winner(|k, slot, _| {
            match slot {
                Slot::Row(row) => {
                    winners.insert(row);
                    if existing.contains(k) {
                        updates.insert(row);
                    }
                }
                Slot::Tombstone => deleted.push(*k),
            }
            Ok::<_, SpillError>(())
        })
        .unwrap();
    let mut rows = Vec::new();
    let all = buffer.parts(1);
    for item in all.iter().flat_map(HeldRows::batches) {
        let (first, batch) = item.unwrap();
        let Some(b) = winning_rows(&batch, first, &winners, &updates).unwrap() else {
            continue;
        };
        let ids = b.column(0).as_primitive::<Int64Type>();
        let offsets = b.column(3).as_primitive::<Int64Type>();
        let ops = b.column(5).as_string::<i32>();
        for r in 0..b.num_rows() {
            rows.push((ids.value(r), offsets.value(r), ops.value(r).to_string()));
        }
    }
    (rows, deleted)
}

#[test]
fn within_a_partition_the_higher_offset_wins_even_with_an_older_timestamp() {
    let mut buffer = buffer();
    buffer
        .add_batch(batch(&[(1, 0, 5, 900), (1, 0, 6, 100)]))
        .unwrap();
    assert_eq!(resolve(&mut buffer, &[]).0, vec![(1, 6, "c".into())]);
}

#[test]
fn across_partitions_the_later_timestamp_then_partition_then_offset_wins() {
    let mut buffer = buffer();
    buffer
        .add_batch(batch(&[(1, 2, 50, 100), (1, 0, 7, 200)]))
        .unwrap();
    buffer
        .add_batch(batch(&[(2, 0, 8, 300), (2, 1, 3, 300)]))
        .unwrap();
    let rows = resolve(&mut buffer, &[1, 2]).0;
    assert_eq!(rows, vec![(1, 7, "u".into()), (2, 3, "u".into())]);
}

#[test]
fn a_message_replaces_the_tables_row_from_its_own_partition_always_and_from_another_only_when_later(
) {
    let message = Version {
        timestamp: 1_000,
        partition: 3,
        offset: 7,
    };
    let row = |timestamp, partition| Stamp {
        timestamp,
        partition,
    };
    // Its own partition: the row came from an earlier offset, even with
    // a later timestamp.
    assert!(message.replaces(&row(9_000, 3)));
    // Another partition: the later timestamp wins, then the higher
    // partition.
    assert!(message.replaces(&row(999, 8)));
    assert!(!message.replaces(&row(1_001, 0)));
    assert!(message.replaces(&row(1_000, 2)));
    assert!(!message.replaces(&row(1_000, 4)));
    // A row of unknown place, or a message without a timestamp against
    // a row of another partition without one.
    assert!(message.replaces(&Stamp::UNKNOWN));
    let untimed = Version {
        timestamp: i64::MIN,
        ..message
    };
    assert!(untimed.replaces(&row(i64::MIN, 1)));
    assert!(!untimed.replaces(&row(5, 1)));
    assert_eq!(message.stamp(), row(1_000, 3));
}

#[test]
fn a_later_tombstone_deletes_and_an_earlier_one_loses() {
    let mut buffer = buffer();
    buffer
        .add_batch(batch(&[(1, 0, 1, 10), (2, 0, 2, 10)]))
        .unwrap();
    let tombstone = |timestamp, offset| Version {
        timestamp,
        partition: 0,
        offset,
    };
    buffer
        .add_tombstone(parse_key_hash(&key(1)).unwrap(), tombstone(20, 3))
        .unwrap();
    buffer
        .add_tombstone(parse_key_hash(&key(2)).unwrap(), tombstone(5, 0))
        .unwrap();
    let (rows, deleted) = resolve(&mut buffer, &[]);
    assert_eq!(deleted, vec![parse_key_hash(&key(1)).unwrap()]);
    assert_eq!(rows, vec![(2, 2, "c".into())]);
    assert_eq!(buffer.messages(), 4);
}

#[test]
fn op_type_comes_from_the_caller_per_key() {
    let mut buffer = buffer();
    buffer
        .add_batch(batch(&[(1, 0, 1, 10), (2, 0, 2, 10)]))
        .unwrap();
    let rows = resolve(&mut buffer, &[2]).0;
    assert_eq!(rows, vec![(1, 1, "c".into()), (2, 2, "u".into())]);
}

#[test]
fn rows_spilled_to_disk_come_back_in_arrival_order_and_the_folder_goes_with_the_buffer() {
    let mut buffer = buffer();
    // More entries than stay in memory: they go to the bucket files.
    let per_batch = 50_000usize;
    let batches = entries::MEMORY_ENTRIES / per_batch + 2;
    for b in 0..batches {
        let rows: Vec<(u8, i32, i64, i64)> = (0..per_batch)
            .map(|i| ((i % 200) as u8, 0, (b * per_batch + i) as i64, 0))
            .collect();
        buffer.add_batch(batch(&rows)).unwrap();
    }
    assert!(buffer.entries.spilled());
    let dir = buffer.dir().to_path_buf();
    let (rows, _) = resolve(&mut buffer, &[]);
    // 200 keys; each key's last message (highest offset) wins, and the
    // rows come out in arrival (offset) order.
    assert_eq!(rows.len(), 200);
    let last = (batches * per_batch) as i64;
    assert!(rows.iter().all(|(_, offset, _)| *offset >= last - 200));
    assert!(rows.windows(2).all(|w| w[0].1 < w[1].1));
    assert!(dir.exists());
    drop(buffer);
    assert!(!dir.exists(), "the spill folder is removed with the buffer");
}

#[test]
fn parts_cut_the_held_rows_into_runs_of_whole_files_in_arrival_order() {
    let mut buffer = buffer();
    buffer.segment_rows = 4;
    // Ten batches of two rows: five files of four rows.
    for b in 0..10u8 {
        let rows = [(b, 0, 2 * b as i64, 0), (b + 100, 0, 2 * b as i64 + 1, 0)];
        buffer.add_batch(batch(&rows)).unwrap();
    }
    buffer
        .for_each_winner(|_, _, _| Ok::<_, SpillError>(()))
        .unwrap();
    let firsts = |parts: &[HeldRows]| -> Vec<Vec<u32>> {
        parts
            .iter()
            .map(|p| p.batches().map(|b| b.unwrap().0).collect())
            .collect()
    };
    let two = firsts(&buffer.parts(2));
    assert_eq!(two.len(), 2);
    assert_eq!(two.concat(), (0..10).map(|b| 2 * b).collect::<Vec<u32>>());
    assert!(two.iter().all(|p| (4..=6).contains(&p.len())), "{two:?}");
    assert_eq!(firsts(&buffer.parts(1)), vec![two.concat()]);
    assert_eq!(buffer.parts(64).len(), 5, "one file per part at most");
}

#[test]
fn a_row_set_holds_exactly_the_rows_put_in() {
    let mut set = RowSet::new(130);
    for row in [0, 63, 64, 129] {
        set.insert(row);
    }
    let held: Vec<u32> = (0..200).filter(|r| set.contains(*r)).collect();
    assert_eq!(held, vec![0, 63, 64, 129]);
    assert!(set.any_in(60..64) && !set.any_in(1..63) && !set.any_in(130..200));
    assert_eq!(set.words().len(), 3);
}

#[test]
fn a_buffer_with_unsent_values_is_not_staged_by_a_writer() {
    let mut buffer = buffer();
    buffer.add_batch(batch(&[(1, 0, 1, 10)])).unwrap();
    assert!(!buffer.has_unsent());
    assert!(crate::sync::upsert_commit::refuse_unsent(&buffer).is_ok());
    let unsent = topicberg_core::UnsentValue {
        row: 0,
        column: Arc::from("id"),
        moved_from: None,
    };
    buffer
        .add_batch_with_unsent(batch(&[(2, 0, 2, 10)]), vec![unsent])
        .unwrap();
    assert!(buffer.has_unsent());
    let refused = crate::sync::upsert_commit::refuse_unsent(&buffer).unwrap_err();
    assert!(
        refused.to_string().contains("REPLICA IDENTITY FULL"),
        "{refused}"
    );
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

/// A change-event batch: (key, partition, offset, `_cdc_lsn`).
fn change_batch(rows: &[(u8, i32, i64, Option<i64>)]) -> RecordBatch {
    let base = batch(&rows.iter().map(|r| (r.0, r.1, r.2, 0)).collect::<Vec<_>>());
    let mut fields: Vec<Field> = base
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("_cdc_lsn", DataType::Int64, true));
    let mut columns = base.columns().to_vec();
    columns.push(Arc::new(Int64Array::from(
        rows.iter().map(|r| r.3).collect::<Vec<_>>(),
    )));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

#[test]
fn one_keys_changes_on_two_partitions_without_a_log_position_are_refused() {
    let winners = |rows: &[(u8, i32, i64, Option<i64>)]| {
        let mut buffer = buffer();
        buffer.set_topic("shop");
        buffer.add_batch(change_batch(rows)).unwrap();
        buffer.for_each_winner(|_, _, _| Ok::<_, SpillError>(()))
    };
    // Positions on both partitions, or one partition without: fine.
    winners(&[(1, 0, 5, Some(10)), (1, 1, 3, Some(20))]).unwrap();
    winners(&[(1, 0, 5, None), (1, 0, 6, None), (2, 1, 3, None)]).unwrap();
    // A key on two partitions, a change without a position: refused.
    let e = winners(&[(1, 0, 5, Some(10)), (1, 1, 3, None)]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("shop: ") && text.contains("partitions 0 (offset 5) and 1 (offset 3)"),
        "{text}"
    );
}
