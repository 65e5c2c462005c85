//! Each key's row keeps its [`Stamp`] (the message's timestamp and
//! partition) through a rebuild, a replay of another writer's commit, a
//! compaction this process followed by counting, and a merge.

use arrow_array::{Int32Array, TimestampMicrosecondArray};
use iceberg::spec::FormatVersion;

use super::*;
use crate::maintain::compact;

/// A table with the columns a stamp is read from.
async fn stamped_fixture() -> Fixture {
    fixture_with(None, &[]).await
}

/// A table of `_olake_id`, `_kafka_partition`, `_kafka_timestamp` and,
/// with `order`, a `long` column of that name, created with `properties`.
async fn fixture_with(order: Option<&str>, properties: &[(&str, &str)]) -> Fixture {
    let dir = TempDir::new();
    let state = dir.0.join("state");
    let destination = Destination::open_embedded(&dir.0.join("catalog"), "default").unwrap();
    let mut columns = vec![
        Column::optional("_olake_id", 1, ColumnType::String),
        Column::optional("_kafka_partition", 2, ColumnType::Int),
        Column::optional("_kafka_timestamp", 3, ColumnType::TimestampTz),
    ];
    columns.extend(order.map(|name| Column::optional(name, 4, ColumnType::Long)));
    let layout = crate::NewTable {
        properties,
        ..Default::default()
    };
    let namespace = vec!["ns".to_string()];
    let table = destination
        .ensure_partitioned_table(&namespace, "t", &columns, FormatVersion::V2, &layout)
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        state,
        destination,
        table,
    }
}

/// The stamp the rows of key `k` get in round `round` (key 3's timestamp
/// is null in round 0).
fn stamp_of(k: i64, round: i64) -> Stamp {
    Stamp {
        timestamp: if k == 3 && round == 0 {
            i64::MIN
        } else {
            1_700_000_000_000_000 + k * 1_000 - round * 7
        },
        partition: ((k + round) % 12) as i32,
    }
}

/// One data file of these keys with their stamps of `round`.
async fn stamped_file(fx: &Fixture, keys: &[i64], round: i64) -> DataFile {
    let stamps: Vec<Stamp> = keys.iter().map(|k| stamp_of(*k, round)).collect();
    let timestamps: TimestampMicrosecondArray = stamps
        .iter()
        .map(|s| (s.timestamp != i64::MIN).then_some(s.timestamp))
        .collect::<TimestampMicrosecondArray>()
        .with_timezone("+00:00");
    let batch = RecordBatch::try_new(
        fx.table.arrow_schema().clone(),
        vec![
            Arc::new(StringArray::from(
                keys.iter().map(|k| key_hex(*k)).collect::<Vec<_>>(),
            )) as ArrayRef,
            Arc::new(Int32Array::from(
                stamps.iter().map(|s| s.partition).collect::<Vec<_>>(),
            )),
            Arc::new(timestamps),
        ],
    )
    .unwrap();
    fx.write_one_file(batch).await
}

fn stamps(index: &KeyIndex, keys: std::ops::Range<i64>) -> Vec<Option<Stamp>> {
    let reader = index.reader().unwrap();
    keys.map(|k| reader.get(&key(k)).unwrap().map(|row| row.stamp))
        .collect()
}

#[tokio::test]
async fn a_rows_stamp_is_read_from_the_table_and_kept_through_replays_compactions_and_merges() {
    let mut fx = stamped_fixture().await;
    let first = stamped_file(&fx, &(0..10).collect::<Vec<_>>(), 0).await;
    let first_path = first.file_path().to_string();
    fx.destination
        .commit_append(&mut fx.table, vec![first], BTreeMap::new())
        .await
        .unwrap();
    let round0: Vec<Option<Stamp>> = (0..10).map(|k| Some(stamp_of(k, 0))).collect();

    // Rebuilt from the table: every row's stamp; a null timestamp is the
    // unknown one.
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Rebuilt(RebuildReason::Missing));
    assert_eq!(stamps(&index, 0..10), round0);
    assert_eq!(stamps(&index, 3..4)[0].unwrap().timestamp, i64::MIN);
    drop(index);

    // Another writer's commit (keys 4 and 5 replaced, 10 new), replayed:
    // its rows' stamps.
    let second = stamped_file(&fx, &[4, 5, 10], 1).await;
    fx.commit_with_deletes(second, &[(first_path.as_str(), &[4, 5])])
        .await;
    let mut index = fx.open().await;
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1));
    let mut expected = round0.clone();
    expected[4] = Some(stamp_of(4, 1));
    expected[5] = Some(stamp_of(5, 1));
    expected.push(Some(stamp_of(10, 1)));
    assert_eq!(stamps(&index, 0..11), expected);

    // A compaction of this process, followed by counting (no file read):
    // the rows move, their stamps go with them, and a merge keeps them.
    index.hold_background_merges();
    let options = super::compaction::every_small_file();
    compact(&fx.destination, &mut fx.table, &options, false, None)
        .await
        .unwrap();
    let mut index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    assert_eq!(index.build_stats().rows_read, 0, "followed by counting");
    assert_eq!(stamps(&index, 0..11), expected);
    index.merge().unwrap();
    assert_eq!(stamps(&index, 0..11), expected);
    drop(index);

    // And a rebuild from the compacted table finds the same stamps.
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let index = fx.open().await;
    assert!(matches!(index.state(), IndexState::Rebuilt(_)));
    assert_eq!(stamps(&index, 0..11), expected);
}

/// A table of `_olake_id`, `_kafka_partition`, `_kafka_timestamp` (all
/// 9000) and a `long` column called `name` created with `properties`,
/// whose three rows hold `[500, null, 70]` there; its index, rebuilt.
async fn ordered_fixture(name: &str, properties: &[(&str, &str)]) -> (Fixture, KeyIndex) {
    let mut fx = fixture_with(Some(name), properties).await;
    let keys = [0i64, 1, 2];
    let batch = RecordBatch::try_new(
        fx.table.arrow_schema().clone(),
        vec![
            Arc::new(StringArray::from(
                keys.iter().map(|k| key_hex(*k)).collect::<Vec<_>>(),
            )) as ArrayRef,
            Arc::new(Int32Array::from(vec![0, 1, 2])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![9_000, 9_000, 9_000]).with_timezone("+00:00"),
            ),
            Arc::new(arrow_array::Int64Array::from(vec![
                Some(500),
                None,
                Some(70),
            ])),
        ],
    )
    .unwrap();
    let file = fx.write_one_file(batch).await;
    fx.destination
        .commit_append(&mut fx.table, vec![file], BTreeMap::new())
        .await
        .unwrap();
    let index = fx.open().await;
    assert!(matches!(index.state(), IndexState::Rebuilt(_)));
    (fx, index)
}

fn stamp(timestamp: i64, partition: i32) -> Option<Stamp> {
    Some(Stamp {
        timestamp,
        partition,
    })
}

#[tokio::test]
async fn a_change_event_tables_stamps_are_its_rows_log_positions() {
    let (_fx, index) = ordered_fixture("_cdc_lsn", &[]).await;
    // A row without a position is stamped with its message timestamp.
    assert_eq!(
        stamps(&index, 0..3),
        [stamp(500, 0), stamp(9_000, 1), stamp(70, 2)]
    );
}

#[tokio::test]
async fn an_order_by_tables_stamps_are_its_order_column_and_otherwise_the_timestamp() {
    let (_fx, index) = ordered_fixture("version", &[(ORDER_BY_PROPERTY, "version")]).await;
    assert_eq!(
        stamps(&index, 0..3),
        [stamp(500, 0), stamp(i64::MIN, 1), stamp(70, 2)]
    );
    // Without the property the column is a payload column like any other.
    let (_fx, index) = ordered_fixture("version", &[]).await;
    assert_eq!(stamps(&index, 0..1), [stamp(9_000, 0)]);
}
