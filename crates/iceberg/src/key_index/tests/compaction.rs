//! The key index and compactions: another engine's replayed by reading,
//! this process's followed by counting, late deletes carried over.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{FormatVersion, ManifestWriterBuilder, Operation, UNASSIGNED_SEQUENCE_NUMBER};
use roaring::RoaringTreemap;

use super::*;
use crate::maintain::{compact, CompactionOptions, CompactionOutcome};

/// The live data files of the table's current snapshot, each with the
/// number of row groups its Parquet footer holds.
async fn live_files_and_row_groups(fx: &Fixture) -> Vec<(DataFile, usize)> {
    use crate::commit::manifest_entries::live_entries;
    use crate::key_index::scan::open_parquet;
    let metadata = fx.table.metadata().clone();
    let io = fx.destination.file_io();
    let live = live_entries(io, &metadata, metadata.current_snapshot().unwrap())
        .await
        .unwrap();
    let mut out = Vec::new();
    for entry in live {
        let footer = open_parquet(io, entry.path(), "test").await.unwrap();
        out.push((entry.file, footer.metadata().num_row_groups()));
    }
    out
}

/// Appends `files` data files of `rows` consecutive keys each, from
/// `first` on, one commit each.
async fn append_runs(fx: &mut Fixture, first: i64, files: i64, rows: i64) {
    for f in 0..files {
        let start = first + f * rows;
        fx.append(&(start..start + rows).collect::<Vec<_>>(), 0)
            .await;
    }
}

/// Compacts every small file of the fixture's table, untiered.
async fn compact_small_files(fx: &mut Fixture) -> CompactionOutcome {
    compact(
        &fx.destination,
        &mut fx.table,
        &every_small_file(),
        false,
        None,
    )
    .await
    .unwrap()
}

/// Compaction of every small file, untiered.
pub(super) fn every_small_file() -> CompactionOptions {
    CompactionOptions {
        target_file_size: 64 << 20,
        min_input_files: 2,
        min_deleted_percent: 0,
        zstd_level: 3,
        tiered: false,
        rewrite_budget: None,
    }
}

#[tokio::test]
async fn a_compaction_since_is_replayed_at_the_new_positions() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let old = fx.data_file(&[1, 2], 0).await;
    let old_path = old.file_path().to_string();
    fx.destination
        .commit_append(&mut fx.table, vec![old.clone()], BTreeMap::new())
        .await
        .unwrap();
    drop(fx.open().await);
    // Rewrite the file (same rows, another order) as a `replace` snapshot.
    let new = fx.data_file(&[2, 1], 0).await;
    let new_path = new.file_path().to_string();
    let metadata = fx.table.metadata().clone();
    let snapshot_id = 777;
    let mut writer = ManifestWriterBuilder::new(
        fx.destination
            .file_io()
            .new_output(format!(
                "{}/metadata/{snapshot_id}-m.avro",
                metadata.location()
            ))
            .unwrap(),
        Some(snapshot_id),
        metadata.current_schema().clone(),
        metadata.default_partition_spec().as_ref().clone(),
    )
    .build_v2_data();
    writer.add_file(new, UNASSIGNED_SEQUENCE_NUMBER).unwrap();
    writer.add_delete_file(old, 1, Some(1)).unwrap();
    let manifest = writer.write_manifest_file().await.unwrap();
    fx.commit_manifests(snapshot_id, vec![manifest], Operation::Replace)
        .await;
    // The replace moves every key the index had: replayed, no rebuild.
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1), "{old_path}");
    assert_eq!(
        all(&index, 3),
        vec![None, at(&new_path, 1), at(&new_path, 0)]
    );
}

/// Deletes that reached a compaction's files while it rewrote them are
/// found by key in the files it wrote (maintain/rebase.rs); a row that is
/// not there exactly once leaves the compaction to be planned again.
#[tokio::test]
async fn late_deletes_are_carried_onto_the_compactions_files_by_key() {
    use crate::maintain::rebase::{translate, LateDeletes, Rebase, RowMap, Uncarried};
    let fx = Fixture::new(FormatVersion::V2).await;
    let io = fx.destination.file_io();
    // Keys 1-4 at positions 0-3; the compaction dropped 1 and 3 (deleted
    // when it planned) and wrote 4, 2.
    let old = fx.data_file(&[1, 2, 3, 4], 0).await;
    let old_path = old.file_path().to_string();
    let new = fx.data_file(&[4, 2], 0).await;
    let new_path = new.file_path().to_string();
    let rebase = Rebase {
        applied: HashMap::from([(old_path.clone(), [0u64, 2].into_iter().collect())]),
        key_field: 1,
        zstd_level: 3,
        rows: RowMap::default(),
    };
    // Meanwhile a writer deleted positions 1 (key 2), 2 (key 3, already
    // gone) and 3 (key 4).
    let mut late = LateDeletes::default();
    late.add(&old_path, &[1u64, 2, 3].into_iter().collect());
    let carried = translate(io, &rebase, &late, std::slice::from_ref(&new))
        .await
        .unwrap()
        .unwrap();
    let expected: roaring::RoaringTreemap = [0u64, 1].into_iter().collect();
    assert_eq!(carried, BTreeMap::from([(new_path, expected)]));
    // Key 2 twice in the new files, or key 4 missing: planned again.
    let twice = fx.data_file(&[2], 1).await;
    let outcome = translate(io, &rebase, &late, &[new.clone(), twice]).await;
    assert_eq!(outcome.unwrap().unwrap_err(), Uncarried::TwiceInNewFiles);
    let missing = fx.data_file(&[2], 0).await;
    let outcome = translate(io, &rebase, &late, &[missing]).await;
    let expected = Uncarried::Missing {
        missing: 1,
        wanted: 2,
    };
    assert_eq!(outcome.unwrap().unwrap_err(), expected);
}

/// Rows written in read order: late deletes are placed by counting, and
/// land where the key lookup finds them.
#[tokio::test]
async fn late_deletes_are_placed_by_counting_where_the_rewrite_kept_the_order() {
    use crate::maintain::rebase::{translate, LateDeletes, Rebase, RowMap, Uncarried};
    let fx = Fixture::new(FormatVersion::V2).await;
    let io = fx.destination.file_io();
    // Two rewritten files; the plan dropped positions 0, 2 of the first
    // (keys 1, 3) and 1 of the second (key 6); the rest was written in
    // order into two new files.
    let a = fx.data_file(&[1, 2, 3, 4], 0).await;
    let b = fx.data_file(&[5, 6, 7, 8], 0).await;
    let (a_path, b_path) = (a.file_path().to_string(), b.file_path().to_string());
    let first = fx.data_file(&[2, 4, 5], 0).await;
    let second = fx.data_file(&[7, 8], 0).await;
    let written = [first.clone(), second.clone()];
    let applied = HashMap::from([
        (a_path.clone(), [0u64, 2].into_iter().collect()),
        (b_path.clone(), [1u64].into_iter().collect()),
    ]);
    let mut rows = RowMap::default();
    rows.add_group(&[(a_path.clone(), 0), (b_path.clone(), 2)], 5, &written);
    let mut by_count = Rebase {
        applied: applied.clone(),
        key_field: 1,
        zstd_level: 3,
        rows,
    };
    let by_key = Rebase {
        applied,
        key_field: 1,
        zstd_level: 3,
        rows: RowMap::default(),
    };
    // Late: keys 2, 3 (already dropped) and 4 of the first; 7 and 8 of
    // the second.
    let mut late = LateDeletes::default();
    late.add(&a_path, &[1u64, 2, 3].into_iter().collect());
    late.add(&b_path, &[2u64, 3].into_iter().collect());
    let counted = translate(io, &by_count, &late, &written)
        .await
        .unwrap()
        .unwrap();
    let expected = BTreeMap::from([
        (
            first.file_path().to_string(),
            [0u64, 1].into_iter().collect(),
        ),
        (
            second.file_path().to_string(),
            [0u64, 1].into_iter().collect(),
        ),
    ]);
    assert_eq!(counted, expected);
    let looked_up = translate(io, &by_key, &late, &written)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(counted, looked_up);
    // A position past the file's rows is not placed.
    let mut past_end = LateDeletes::default();
    past_end.add(&b_path, &[4u64].into_iter().collect());
    let outcome = translate(io, &by_count, &past_end, &written).await.unwrap();
    let past = Uncarried::PastRewrite {
        path: b_path.clone(),
        pos: 4,
    };
    assert_eq!(outcome.unwrap_err(), past);
    // New files holding other row counts than the rewrite wrote: the
    // group is not mapped and its deletes are found by key.
    by_count.rows = RowMap::default();
    by_count
        .rows
        .add_group(&[(a_path, 0), (b_path.clone(), 2)], 6, &written);
    let looked_up = translate(io, &by_count, &late, &written)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(looked_up, expected);
    let outcome = translate(io, &by_count, &past_end, &written).await.unwrap();
    // Looked up by key, a position past the file's rows names no row:
    // nothing to carry.
    assert_eq!(outcome.unwrap(), BTreeMap::new());
}

/// A compaction this process committed (a follower's background pass):
/// its kept key index follows it by keeping the moves counted, reads no
/// file and rewrites no run on the way; lookups go through the moves (a
/// later commit's rows are not moved) until a merge folds them in; a stop
/// before the fold (a crash) rebuilds the index at the next open. Each
/// time it finds what a rebuild from the table finds.
#[tokio::test]
async fn a_kept_index_follows_its_processs_compaction_lazily_and_agrees_with_a_rebuild() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let (a, _, _) = fx.append(&(0..10).collect::<Vec<_>>(), 0).await;
    let (b, _, _) = fx.append(&(10..20).collect::<Vec<_>>(), 0).await;
    let mut index = fx.open().await;
    index.hold_background_merges();
    // Keys 2 and 13 updated: their old rows deleted.
    let c = fx.data_file(&[2, 13], 1).await;
    fx.commit_with_deletes(c, &[(a.as_str(), &[2]), (b.as_str(), &[3])])
        .await;
    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    assert_eq!(index.build_stats().rows_moved, 0);
    let outcome = compact_small_files(&mut fx).await;
    assert_eq!(outcome.data_files_rewritten, 3);
    assert_eq!(outcome.rows_dropped, 2);
    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1));
    assert_eq!(index.build_stats().rows_read, 0, "no file read");
    assert_eq!(index.build_stats().rows_moved, 20);
    assert!(index.merge_pending(), "the moves wait for a merge");
    let index_file = fx.index_dir().join("keys.index");
    let marker = || std::fs::read_to_string(&index_file).unwrap();
    assert!(marker().contains("moves-pending"), "{}", marker());
    // Key 5 updated after the compaction: its new row is in a run written
    // after the moves, which it does not go through.
    let five = index.lookup([key(5)]).unwrap().remove(0).unwrap();
    let d = fx.data_file(&[5], 2).await;
    let d_path = d.file_path().to_string();
    fx.commit_with_deletes(d, &[(five.data_file.as_str(), &[five.pos])])
        .await;
    let mut index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    let lazily = all(&index, 20);
    assert!(lazily.iter().all(Option::is_some));
    assert_eq!(lazily[5], at(&d_path, 0));
    index.merge().unwrap();
    assert!(!index.merge_pending());
    assert!(!marker().contains("moves-pending"), "{}", marker());
    assert_eq!(all(&index, 20), lazily, "folded in, the same rows");
    drop(index);
    let reopened = fx.open().await;
    assert_eq!(reopened.state(), &IndexState::Fresh);
    drop(reopened);
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let rebuilt = fx.open().await;
    assert_eq!(
        rebuilt.state(),
        &IndexState::Rebuilt(RebuildReason::Missing)
    );
    assert_eq!(all(&rebuilt, 20), lazily);

    // A second compaction, and a stop before its moves are folded in.
    let mut index = rebuilt;
    index.hold_background_merges();
    fx.append(&(20..30).collect::<Vec<_>>(), 3).await;
    let outcome = compact_small_files(&mut fx).await;
    assert!(outcome.data_files_rewritten >= 2);
    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    let stats = index.build_stats();
    assert_eq!(stats.rows_read, 10, "the appended file only");
    assert_eq!(stats.rows_moved, 30);
    assert!(marker().contains("moves-pending"), "{}", marker());
    let lazily = all(&index, 30);
    drop(index);
    let reopened = fx.open().await;
    assert!(
        matches!(reopened.state(), IndexState::Rebuilt(RebuildReason::Unreadable(why)) if why.contains("row moves")),
        "{:?}",
        reopened.state()
    );
    assert_eq!(all(&reopened, 30), lazily);
    assert!(lazily.iter().all(Option::is_some));
}

/// `min_deleted_percent`: a file whose deleted rows reach the share is
/// rewritten, one below it keeps its deletes in a delete file; 0 rewrites
/// every file with a delete.
#[tokio::test]
async fn a_file_is_rewritten_for_its_deletes_once_they_reach_the_deleted_percentage() {
    for (percent, rewritten) in [(30u8, 1usize), (0, 2)] {
        let mut fx = Fixture::new(FormatVersion::V2).await;
        let (a, _, _) = fx.append(&(0..10).collect::<Vec<_>>(), 0).await;
        let (b, _, _) = fx.append(&(10..20).collect::<Vec<_>>(), 0).await;
        // 10% of a's rows deleted, 50% of b's.
        let c = fx.data_file(&[1, 10, 11, 12, 13, 14], 1).await;
        let deletes: [(&str, &[u64]); 2] = [(a.as_str(), &[1]), (b.as_str(), &[0, 1, 2, 3, 4])];
        fx.commit_with_deletes(c, &deletes).await;
        let options = CompactionOptions {
            // No file is small: only deletes make one worth rewriting.
            target_file_size: 1,
            min_input_files: 100,
            min_deleted_percent: percent,
            zstd_level: 3,
            tiered: false,
            rewrite_budget: None,
        };
        let outcome = compact(&fx.destination, &mut fx.table, &options, false, None)
            .await
            .unwrap();
        assert_eq!(outcome.data_files_rewritten, rewritten, "{percent}%");
        let kept = rewritten == 1;
        let index = fx.open().await;
        let rows = all(&index, 20);
        assert!(rows.iter().all(Option::is_some), "{percent}%");
        // Key 0 is still in a when a was left with its delete file.
        assert_eq!(rows[0].as_ref().unwrap().data_file == a, kept, "{percent}%");
    }
}

/// A compaction's commit attempts: each reads only the snapshots since the
/// last one and, on v2, adds delete files for their late deletes only,
/// keeping what the earlier attempts carried over; the committed table
/// holds every live key once, the late deleted rows gone.
#[tokio::test]
async fn a_later_compaction_attempt_carries_only_the_late_deletes_since_the_last() {
    use crate::commit::snapshot_commit::PendingCommit;
    use crate::maintain::replace::PendingReplace;
    use crate::maintain::{plan, rebase_of, rewrite};
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let (a, _, _) = fx.append(&(0..10).collect::<Vec<_>>(), 0).await;
    let (b, _, _) = fx.append(&(10..20).collect::<Vec<_>>(), 0).await;
    let options = every_small_file();
    let io = fx.destination.file_io().clone();
    let base = fx.table.metadata().clone();
    let planned = plan::plan(&io, &base, &options).await.unwrap();
    let mut written = rewrite::rewrite(&io, &base, &planned, &options)
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    let removed = planned
        .rewritten()
        .cloned()
        .chain(planned.removed_deletes.iter().cloned())
        .collect();
    let rebase = rebase_of(&planned, &options, std::mem::take(&mut written.row_map));
    let mut pending = PendingReplace::new(
        &base,
        planned.base,
        written.files.clone(),
        Vec::new(),
        removed,
        rebase,
    );
    // Key 2 updated while the compaction wrote: a late delete on a.
    let c = fx.data_file(&[2], 1).await;
    let c_path = c.file_path().to_string();
    fx.commit_with_deletes(c, &[(a.as_str(), &[2])]).await;
    (&mut pending)
        .build(&io, fx.table.metadata(), 1)
        .await
        .unwrap();
    assert_eq!((pending.carried.len(), pending.carried_rows), (1, 1));
    let first = pending.carried[0].file_path().to_string();
    // Key 13 updated before the second attempt: only its delete is added.
    let d = fx.data_file(&[13], 1).await;
    let d_path = d.file_path().to_string();
    fx.commit_with_deletes(d, &[(b.as_str(), &[3])]).await;
    (&mut pending)
        .build(&io, fx.table.metadata(), 2)
        .await
        .unwrap();
    assert_eq!((pending.carried.len(), pending.carried_rows), (2, 2));
    assert_eq!(
        pending.carried[0].file_path(),
        first,
        "attempt 1's file kept"
    );
    // Committed by a third attempt on the table as it is.
    fx.destination
        .commit_with_retry(&mut fx.table, &mut pending, 3)
        .await
        .unwrap();
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Rebuilt(RebuildReason::Missing));
    assert_eq!(
        index.build_stats().duplicate_keys,
        0,
        "no late row resurrected"
    );
    let rows = all(&index, 20);
    assert!(rows.iter().all(Option::is_some));
    assert_eq!(rows[2], at(&c_path, 0));
    assert_eq!(rows[13], at(&d_path, 0));
    assert!(rows
        .iter()
        .flatten()
        .all(|r| r.data_file != a && r.data_file != b));
}

/// A round's deletes found before this process's compaction landed are
/// carried to the rows' new places (what the upsert commit does instead of
/// computing them again): each carried position is where the key index,
/// brought up to the compaction, finds the same key. A position the
/// compaction dropped, or another writer's commit since, is not carried.
#[tokio::test]
async fn deletes_found_before_a_compaction_are_carried_to_the_rows_new_places() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let (a, _, _) = fx.append(&(0..10).collect::<Vec<_>>(), 0).await;
    let (b, _, _) = fx.append(&(10..20).collect::<Vec<_>>(), 0).await;
    let c = fx.data_file(&[2, 13], 1).await;
    fx.commit_with_deletes(c, &[(a.as_str(), &[2]), (b.as_str(), &[3])])
        .await;
    let index = fx.open().await;
    let base = fx.table.metadata().current_snapshot_id();
    // A round's lookups on `base`: keys 2 (in c), 5 and 15 are updated.
    let found = index.lookup([key(2), key(5), key(15)]).unwrap();
    let mut retire: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    for row in found.iter().flatten() {
        retire
            .entry(row.data_file.clone())
            .or_default()
            .insert(row.pos);
    }
    assert_eq!(retire.len(), 3, "{retire:?}");
    let unchanged = fx
        .destination
        .carry_positions(fx.table.metadata(), base, &retire);
    assert_eq!(
        unchanged.as_ref(),
        Some(&retire),
        "nothing since: unchanged"
    );

    let outcome = compact_small_files(&mut fx).await;
    assert_eq!(outcome.data_files_rewritten, 3);
    let carried = fx
        .destination
        .carry_positions(fx.table.metadata(), base, &retire)
        .expect("only this process's compaction since");
    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    let mut expected: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    for row in index
        .lookup([key(2), key(5), key(15)])
        .unwrap()
        .iter()
        .flatten()
    {
        expected
            .entry(row.data_file.clone())
            .or_default()
            .insert(row.pos);
    }
    assert_eq!(expected.values().map(|r| r.len()).sum::<u64>(), 3);
    assert_eq!(carried, expected);
    assert!(!carried.contains_key(&a) && !carried.contains_key(&b));

    // Row 2 of a was deleted before the compaction: not a live row.
    let dropped = BTreeMap::from([(a.clone(), RoaringTreemap::from_iter([2u64]))]);
    let none = fx
        .destination
        .carry_positions(fx.table.metadata(), base, &dropped);
    assert_eq!(none, None, "a row the compaction left out");

    // Another writer's commit since: compute again.
    fx.append(&[30], 2).await;
    let none = fx
        .destination
        .carry_positions(fx.table.metadata(), base, &retire);
    assert_eq!(none, None, "an append since");
}

/// Files whose row groups are large and that have no deletes are stitched
/// (maintain/stitch.rs): their row groups copied as they are, each file's
/// rows kept in order, the metrics merged; the key index follows by
/// counting and finds what a rebuild reading the new file finds.
#[tokio::test]
async fn a_compaction_of_large_row_groups_without_deletes_stitches_them_in_order() {
    use crate::maintain::stitch::MIN_STITCH_ROWS;
    use iceberg::spec::Datum;

    let mut fx = Fixture::new(FormatVersion::V2).await;
    let per_file = MIN_STITCH_ROWS + 10;
    let mut old = Vec::new();
    for f in 0..3 {
        let keys: Vec<i64> = (f * per_file..(f + 1) * per_file).collect();
        old.push(fx.append(&keys, 7).await.0);
    }
    let total = 3 * per_file;
    let mut index = fx.open().await;
    index.hold_background_merges();
    let outcome = compact_small_files(&mut fx).await;
    assert_eq!(outcome.data_files_rewritten, 3);
    assert_eq!(outcome.data_files_written, 1);
    assert_eq!(outcome.rows_written, total as u64);

    let live = live_files_and_row_groups(&fx).await;
    assert_eq!(live.len(), 1, "one data file left");
    let (new, row_groups) = &live[0];
    assert!(!old.contains(&new.file_path().to_string()));
    // Stitched: the three row groups kept as they were (a rewrite of these
    // 13 MB of rows writes one row group).
    assert_eq!(*row_groups, 3);
    assert_eq!(new.record_count(), total as u64);
    assert_eq!(new.split_offsets().map(<[i64]>::len), Some(3));
    // Metrics merged: counts summed, bounds over every file (v = key * 10 + 7).
    assert_eq!(new.value_counts().get(&2), Some(&(total as u64)));
    assert_eq!(new.null_value_counts().get(&2), Some(&0));
    assert_eq!(new.lower_bounds().get(&2), Some(&Datum::long(7)));
    assert_eq!(
        new.upper_bounds().get(&2),
        Some(&Datum::long((total - 1) * 10 + 7))
    );
    // Every row in order: the key index follows by counting, no file read,
    // and finds each key where a rebuild reading the new file finds it.
    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    assert_eq!(index.build_stats().rows_read, 0, "no file read");
    assert_eq!(index.build_stats().rows_moved, total as u64);
    let new_path = new.file_path().to_string();
    let followed = all(&index, total);
    let mut positions: Vec<u64> = followed
        .iter()
        .map(|l| {
            let l = l.as_ref().expect("every key found");
            assert_eq!(l.data_file, new_path);
            l.pos
        })
        .collect();
    // Each input file's rows stay together and in their order.
    assert!(positions[..per_file as usize]
        .windows(2)
        .all(|w| w[1] == w[0] + 1));
    positions.sort_unstable();
    assert!(positions.iter().enumerate().all(|(i, p)| *p == i as u64));
    drop(index);
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let rebuilt = fx.open().await;
    assert_eq!(
        all(&rebuilt, total),
        followed,
        "read from the file, the same rows"
    );
}

/// Row groups below the stitching size are rewritten into one.
#[tokio::test]
async fn a_compaction_of_small_row_groups_rewrites_them() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    append_runs(&mut fx, 0, 3, 100).await;
    let outcome = compact_small_files(&mut fx).await;
    assert_eq!(outcome.data_files_written, 1);
    let live = live_files_and_row_groups(&fx).await;
    assert_eq!(live[0].1, 1, "rewritten, not stitched");
    assert_eq!(live[0].0.record_count(), 300);
}

/// A group mixing large and small row groups: the large files stitched
/// into one file, the small ones rewritten into another; every key where a
/// rebuild finds it.
#[tokio::test]
async fn a_compaction_stitches_the_large_files_of_a_group_and_rewrites_the_small_ones() {
    use crate::maintain::stitch::MIN_STITCH_ROWS;

    let mut fx = Fixture::new(FormatVersion::V2).await;
    let large = MIN_STITCH_ROWS + 10;
    fx.append(&(0..large).collect::<Vec<_>>(), 0).await;
    append_runs(&mut fx, large, 3, 100).await;
    fx.append(&(large + 300..2 * large + 300).collect::<Vec<_>>(), 0)
        .await;
    let total = 2 * large + 300;
    let mut index = fx.open().await;
    index.hold_background_merges();
    let outcome = compact_small_files(&mut fx).await;
    assert_eq!(outcome.data_files_rewritten, 5);
    assert_eq!(outcome.data_files_stitched, 2);
    assert_eq!(outcome.data_files_written, 2);
    assert_eq!(outcome.rows_written, total as u64);

    let mut shapes: Vec<(u64, usize)> = live_files_and_row_groups(&fx)
        .await
        .iter()
        .map(|(file, row_groups)| (file.record_count(), *row_groups))
        .collect();
    shapes.sort_unstable();
    assert_eq!(shapes, vec![(300, 1), (2 * large as u64, 2)]);

    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    assert_eq!(index.build_stats().rows_read, 0, "no file read");
    let followed = all(&index, total);
    assert!(followed.iter().all(Option::is_some));
    drop(index);
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let rebuilt = fx.open().await;
    assert_eq!(all(&rebuilt, total), followed);
}

/// A compaction of ours leaves manifests that only record its removals
/// (DELETED entries); the snapshot after it, an append as a follower's
/// next round commits, leaves them out, so readers do not open them at
/// every scan, and every row is still there once. Another engine's such
/// manifest is carried forward (its maintenance may be about to replace
/// it: Spark's `rewrite_manifests` fails when one it read is gone) until
/// our next compaction.
#[tokio::test]
async fn an_append_after_a_compaction_leaves_out_the_manifests_of_removals_only() {
    use crate::commit::manifest_entries::live_entries;
    use crate::table_metadata::{current_manifests, has_live_files};

    let mut fx = Fixture::new(FormatVersion::V2).await;
    append_runs(&mut fx, 0, 3, 10).await;
    let io = fx.destination.file_io().clone();
    let removals_only =
        |manifests: Vec<ManifestFile>| manifests.iter().filter(|m| !has_live_files(m)).count();
    compact_small_files(&mut fx).await;
    let after_compaction = current_manifests(&io, fx.table.metadata()).await.unwrap();
    assert!(
        removals_only(after_compaction) > 0,
        "the compaction's snapshot records its removals"
    );
    fx.append(&[30, 31], 1).await;
    let metadata = fx.table.metadata().clone();
    let after_append = current_manifests(&io, &metadata).await.unwrap();
    assert_eq!(removals_only(after_append.clone()), 0, "ours left out");
    let live = live_entries(&io, &metadata, metadata.current_snapshot().unwrap())
        .await
        .unwrap();
    let rows: u64 = live.iter().map(|e| e.file.record_count()).sum();
    assert_eq!(
        (live.len(), rows),
        (2, 32),
        "the compacted file and the new one"
    );

    // Another engine's snapshot (no topicberg commit id) with a manifest
    // of one removal only.
    let snapshot_id = 888;
    let mut writer = ManifestWriterBuilder::new(
        io.new_output(format!(
            "{}/metadata/{snapshot_id}-m.avro",
            metadata.location()
        ))
        .unwrap(),
        Some(snapshot_id),
        metadata.current_schema().clone(),
        metadata.default_partition_spec().as_ref().clone(),
    )
    .build_v2_data();
    let removed = fx.data_file(&[99], 0).await;
    writer.add_delete_file(removed, 1, Some(1)).unwrap();
    let theirs = writer.write_manifest_file().await.unwrap();
    let mut manifests = after_append;
    manifests.push(theirs);
    fx.commit_manifests(snapshot_id, manifests, Operation::Replace)
        .await;
    fx.append(&[32], 2).await;
    let carried = current_manifests(&io, fx.table.metadata()).await.unwrap();
    assert_eq!(
        removals_only(carried),
        1,
        "another engine's carried forward"
    );
    compact_small_files(&mut fx).await;
    fx.append(&[33], 3).await;
    let after = current_manifests(&io, fx.table.metadata()).await.unwrap();
    assert_eq!(
        removals_only(after),
        0,
        "dropped by our compaction, ours by the append"
    );

    drop(fx.open().await);
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let rebuilt = fx.open().await;
    assert!(all(&rebuilt, 34).iter().all(Option::is_some));
}

/// The deleted positions of the table's live position delete files, and
/// how many of those files there are.
async fn live_position_deletes(fx: &Fixture) -> (usize, BTreeMap<String, Vec<u64>>) {
    use crate::commit::manifest_entries::live_entries;
    use crate::key_index::scan::read_position_deletes;
    let metadata = fx.table.metadata().clone();
    let io = fx.destination.file_io();
    let live = live_entries(io, &metadata, metadata.current_snapshot().unwrap())
        .await
        .unwrap();
    let deletes: Vec<_> = live.iter().filter(|e| !e.is_data()).collect();
    let mut found = HashMap::new();
    for delete in &deletes {
        read_position_deletes(io, delete.path(), |_| true, &mut found)
            .await
            .unwrap();
    }
    let positions = found
        .into_iter()
        .map(|(path, bitmap)| (path, bitmap.iter().collect()))
        .collect();
    (deletes.len(), positions)
}

/// A follower's pass under a rewrite budget (`maintain/leftover.rs`):
/// the file with the largest share of deleted rows is rewritten, the
/// others are left, and the two rounds' position delete files become one
/// per file left, naming exactly its deleted rows; every key is where it
/// was or in the new file, and a rebuilt index agrees.
#[tokio::test]
async fn a_budgeted_pass_rewrites_the_most_deleted_file_and_merges_the_deletes_of_each_other_file()
{
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let (a, _, _) = fx.append(&(0..10).collect::<Vec<_>>(), 0).await;
    let (b, _, _) = fx.append(&(10..20).collect::<Vec<_>>(), 0).await;
    let (c, _, _) = fx.append(&(20..30).collect::<Vec<_>>(), 0).await;
    // Two rounds, each with one delete file naming several files: a 10%
    // deleted, b 60%, c 20%.
    let d = fx.data_file(&[1, 11, 12, 21], 1).await;
    let d_path = d.file_path().to_string();
    let first: [(&str, &[u64]); 3] = [
        (a.as_str(), &[1]),
        (b.as_str(), &[1, 2]),
        (c.as_str(), &[1]),
    ];
    fx.commit_with_deletes(d, &first).await;
    let e = fx.data_file(&[13, 14, 15, 16, 22], 2).await;
    let e_path = e.file_path().to_string();
    let second: [(&str, &[u64]); 2] = [(b.as_str(), &[3, 4, 5, 6]), (c.as_str(), &[2])];
    fx.commit_with_deletes(e, &second).await;
    assert_eq!(live_position_deletes(&fx).await.0, 2);
    let options = CompactionOptions {
        // No file is small: only deletes make one worth rewriting.
        target_file_size: 1,
        min_input_files: 100,
        min_deleted_percent: 0,
        zstd_level: 3,
        tiered: true,
        // Room for one file: the first is taken whatever its size.
        rewrite_budget: Some(1),
    };
    let outcome = compact(&fx.destination, &mut fx.table, &options, false, None)
        .await
        .unwrap();
    assert_eq!(outcome.data_files_rewritten, 1, "{outcome:?}");
    assert_eq!(outcome.rows_written, 4, "b's live rows: {outcome:?}");
    assert_eq!(outcome.delete_files_removed, 2, "{outcome:?}");
    assert_eq!(outcome.delete_files_merged, 2, "{outcome:?}");
    let (files, positions) = live_position_deletes(&fx).await;
    assert_eq!(files, 2, "one for a, one for c");
    let expected = BTreeMap::from([(a.clone(), vec![1]), (c.clone(), vec![1, 2])]);
    assert_eq!(positions, expected);
    let live: Vec<String> = live_files_and_row_groups(&fx)
        .await
        .into_iter()
        .map(|(f, _)| f.file_path().to_string())
        .collect();
    assert!(!live.contains(&b), "{live:?}");
    assert!(live.contains(&a) && live.contains(&c), "{live:?}");
    let index = fx.open().await;
    let rows = all(&index, 30);
    assert_eq!(rows[0], at(&a, 0));
    assert_eq!(rows[1], at(&d_path, 0));
    assert_eq!(rows[21], at(&d_path, 3));
    assert_eq!(rows[22], at(&e_path, 4));
    assert_eq!(rows[23], at(&c, 3));
    let b_left = [10, 17, 18, 19];
    let new = rows[10].as_ref().unwrap().data_file.clone();
    assert!(![&a, &b, &c].contains(&&new), "{new}");
    for (pos, key) in b_left.iter().enumerate() {
        assert_eq!(rows[*key as usize], at(&new, pos as u64), "key {key}");
    }
    drop(index);
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    assert_eq!(all(&fx.open().await, 30), rows);
}
