//! The store's files: runs, merges, reopening, `keys.index`.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

use super::*;

fn key(i: u32) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(&i.to_be_bytes());
    k
}

/// A row at `pos` of file `file`, with a stamp of its own.
fn row(file: u32, pos: u64) -> IndexedRow {
    IndexedRow {
        file,
        pos,
        stamp: super::super::Stamp {
            timestamp: pos as i64 * 3 - 1,
            partition: file as i32 + 1,
        },
    }
}

/// An index of the layout before rows kept their stamps (28-byte
/// entries) is not read: it opens as unreadable, so the index is rebuilt
/// from the table, and its runs are deleted.
#[test]
fn an_index_of_the_older_layout_opens_unreadable_and_its_runs_go() {
    let dir = std::env::temp_dir().join(format!("tb-layout-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "{HEADER}\nlayout 2\ntable-uuid t\nsnapshot-id 5\nkeys 1\nnext-run 1\nrun 0\n\
         file 0 s3://b/data/a.parquet\n{END_LINE}\n"
    );
    std::fs::write(dir.join(INDEX_FILE), text).unwrap();
    std::fs::write(dir.join("keys-0.run"), [0u8; 44]).unwrap();
    let (store, found) = Store::open(&dir).unwrap();
    assert!(matches!(found, Found::Unreadable(_)), "{found:?}");
    assert_eq!(store.len(), 0);
    assert!(!dir.join("keys-0.run").exists(), "the old run is deleted");
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression: an index file cut inside its last data file path parsed
/// as whole (a shorter path), which a half-cut test hit at random.
#[test]
fn an_index_cut_anywhere_is_refused() {
    let text = format!(
        "{HEADER}\nlayout {LAYOUT}\ntable-uuid t\nsnapshot-id 5\nkeys 2\nnext-run 1\nrun 0\n\
         file 0 s3://b/data/a.parquet\nfile 1 s3://b/data/b.parquet\n{END_LINE}\n"
    );
    let whole = parse(&text).expect("the whole file reads");
    assert_eq!(whole.files.len(), 2);
    for cut in 0..text.len() - 1 {
        assert!(
            parse(&text[..cut]).is_err(),
            "cut at {cut}: {:?}",
            &text[..cut]
        );
    }
}

/// Random puts, removes and conditional removes over many commits,
/// with merges, reopens and uncommitted writes, against a map.
#[test]
fn runs_merged_and_reopened_agree_with_a_map() {
    let dir = std::env::temp_dir().join(format!("tb-store-{}", uuid::Uuid::new_v4().simple()));
    let meta = |s: i64| Meta {
        table_uuid: "t".into(),
        snapshot: Some(s),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut model: BTreeMap<[u8; 16], IndexedRow> = BTreeMap::new();
    let (mut store, found) = Store::open(&dir).unwrap();
    assert!(matches!(found, Found::Missing));
    let mut max_runs = 0;
    for commit in 0..60i64 {
        let n = if commit % 10 == 0 {
            5_000
        } else {
            rng.random_range(1..800)
        };
        let mut ops = Vec::new();
        for _ in 0..n {
            let k = key(rng.random_range(0..4_000));
            let (f, p) = (rng.random_range(0..3), rng.random_range(0..50));
            let op = match rng.random_range(0..10) {
                0 => Op::Remove(k),
                1 => Op::RemoveIfAt(k, f, p),
                _ => Op::Put(k, row(f, p)),
            };
            match op {
                Op::Put(k, r) => {
                    model.insert(k, r);
                }
                Op::Remove(k) => {
                    model.remove(&k);
                }
                Op::RemoveIfAt(k, f, p) => {
                    if model.get(&k).is_some_and(|r| r.is_at(f, p)) {
                        model.remove(&k);
                    }
                }
            }
            ops.push(op);
        }
        store.write(&mut ops, true).unwrap();
        store.commit(&meta(commit)).unwrap();
        max_runs = max_runs.max(store.runs.len());
        if commit % 7 == 0 {
            // Written, never committed: gone after a reopen.
            let mut lost = vec![Op::Put(key(1), row(9, 9)), Op::Remove(key(2))];
            store.write(&mut lost, true).unwrap();
            drop(store);
            let (reopened, found) = Store::open(&dir).unwrap();
            assert!(matches!(found, Found::Index(m) if m == meta(commit)));
            store = reopened;
        }
        assert_eq!(store.len(), model.len() as u64, "commit {commit}");
        let mut blocks = Blocks::default();
        for i in 0..4_000 {
            let k = key(i);
            assert_eq!(store.get(&k, &mut blocks).unwrap(), model.get(&k).copied());
        }
    }
    assert!(max_runs <= MAX_RUNS, "{max_runs} runs");
    // A second process is refused while this one has it open.
    assert!(Store::open(&dir)
        .unwrap_err()
        .to_string()
        .contains("another process"));
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A follower's index would otherwise list every data file the table
/// ever had: after a merge of every run, the paths no run names are
/// dropped; ids are not reused, and a reopened index reads the gaps.
#[test]
fn data_file_paths_no_run_names_are_dropped_at_a_merge_of_every_run() {
    let dir = std::env::temp_dir().join(format!("tb-store-{}", uuid::Uuid::new_v4().simple()));
    let meta = |s: i64| Meta {
        table_uuid: "t".into(),
        snapshot: Some(s),
    };
    let (mut store, _) = Store::open(&dir).unwrap();
    let a = store.file_id("s3://b/a.parquet");
    let b = store.file_id("s3://b/b.parquet");
    let mut ops: Vec<Op> = (0..10)
        .map(|i| Op::Put(key(i), row(a, u64::from(i))))
        .collect();
    store.write(&mut ops, true).unwrap();
    store.commit(&meta(1)).unwrap();
    // Every key's row moves to b (a compaction, or updates).
    let mut ops: Vec<Op> = (0..10)
        .map(|i| Op::Put(key(i), row(b, u64::from(i))))
        .collect();
    store.write(&mut ops, true).unwrap();
    store.commit_unmerged(&meta(2)).unwrap();
    assert_eq!(store.file_count(), 2);
    store.merge_all().unwrap();
    assert_eq!(store.file_count(), 1);
    assert_eq!(
        (store.path(a), store.path(b)),
        (None, Some("s3://b/b.parquet"))
    );
    let c = store.file_id("s3://b/c.parquet");
    assert_eq!(c, 2, "an id is not reused");
    let mut ops = vec![Op::Put(key(3), row(c, 0))];
    store.write(&mut ops, true).unwrap();
    store.commit_unmerged(&meta(3)).unwrap();
    drop(store);
    let (store, found) = Store::open(&dir).unwrap();
    assert!(matches!(found, Found::Index(m) if m == meta(3)));
    assert_eq!(store.path(a), None);
    assert_eq!(store.path(c), Some("s3://b/c.parquet"));
    let mut blocks = Blocks::default();
    assert_eq!(store.get(&key(3), &mut blocks).unwrap(), Some(row(c, 0)));
    assert_eq!(store.get(&key(4), &mut blocks).unwrap(), Some(row(b, 4)));
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A rebuild's blind puts: duplicates across and within runs counted,
/// one run left, the live count exact.
#[test]
fn a_rebuild_counts_duplicates_and_merges_into_one_run() {
    let dir = std::env::temp_dir().join(format!("tb-store-{}", uuid::Uuid::new_v4().simple()));
    let (mut store, _) = Store::open(&dir).unwrap();
    let mut a: Vec<Op> = (0..100)
        .map(|i| Op::Put(key(i), row(0, u64::from(i))))
        .collect();
    a.push(Op::Put(key(5), row(0, 500)));
    let within = store.write(&mut a, false).unwrap().replaced;
    let mut b: Vec<Op> = (90..120)
        .map(|i| Op::Put(key(i), row(1, u64::from(i))))
        .collect();
    store.write(&mut b, false).unwrap();
    let shadowed = store.merge_all().unwrap();
    assert_eq!((within, shadowed), (1, 10));
    assert_eq!(store.runs.len(), 1);
    assert_eq!(store.len(), 120);
    let mut blocks = Blocks::default();
    assert_eq!(store.get(&key(5), &mut blocks).unwrap(), Some(row(0, 500)));
    assert_eq!(store.get(&key(95), &mut blocks).unwrap(), Some(row(1, 95)));
    // A stream out of key order is refused, and changes nothing named.
    let unsorted = [Op::Put(key(300), row(2, 0)), Op::Put(key(200), row(2, 1))];
    assert!(store
        .write_sorted(unsorted.into_iter().map(Ok), true)
        .is_err());
    assert_eq!((store.runs.len(), store.len()), (1, 120));
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}
