use super::*;

/// A folder of its own, deleted after the test.
struct Folder(PathBuf);

impl Folder {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn folder() -> Folder {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Folder(std::env::temp_dir().join(format!("tb-spill-{}-{n}", std::process::id())))
}

/// Writes one segment of `(from, next)` frames; each frame's records are
/// its `from` as text, its aborted list `[(from, next)]`.
fn segment(spill: &Spill, partition: i32, frames: &[(i64, i64)]) {
    let mut writer = spill.writer("t", partition).unwrap();
    for &(from, next) in frames {
        let records = from.to_string();
        writer
            .append(from, next, &[(from, next)], records.as_bytes())
            .unwrap();
    }
    spill.keep(writer).unwrap();
}

/// Every frame a reader from `from` yields: (records as text, next).
fn read(spill: &Spill, partition: i32, from: i64) -> Option<Vec<(String, i64)>> {
    let mut reader = spill.reader("t", partition, from)?;
    let mut out = Vec::new();
    while let Some(frame) = reader.next_frame().unwrap() {
        let records = String::from_utf8(frame.records.to_vec()).unwrap();
        assert_eq!(frame.aborted, [(records.parse().unwrap(), frame.next)]);
        out.push((records, frame.next));
    }
    Some(out)
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn frames_are_read_back_from_the_frame_that_holds_the_offset_asked() {
    let dir = folder();
    let spill = Spill::create(dir.path(), 1 << 20).unwrap();
    segment(&spill, 0, &[(0, 10), (10, 20)]);
    segment(&spill, 0, &[(20, 30)]);
    assert_eq!(spill.range("t", 0), Some((0, 30)));
    let from_15 = read(&spill, 0, 15).unwrap();
    assert_eq!(from_15, [("10".to_string(), 20), ("20".to_string(), 30)]);
    assert_eq!(read(&spill, 0, 0).unwrap().len(), 3);
    // Not held from its start, or past its end: Kafka reads it.
    assert!(read(&spill, 0, 30).is_none());
    assert!(read(&spill, 0, -1).is_none());
    assert!(read(&spill, 1, 0).is_none());
    let topics = spill.topics();
    assert_eq!(topics["t"].offsets, 30);
    assert_eq!(topics["t"].bytes, spill.bytes());
    assert_eq!(spill.bytes(), 3 * (HEADER as u64 + 16) + 1 + 2 + 2);
}

#[test]
fn a_commit_releases_the_segments_it_covers_and_their_files() {
    let dir = folder();
    let spill = Spill::create(dir.path(), 1 << 20).unwrap();
    segment(&spill, 0, &[(0, 10), (10, 20)]);
    segment(&spill, 0, &[(20, 30), (30, 40)]);
    let whole = spill.bytes();
    spill.release("t", 0, 25);
    assert_eq!(spill.range("t", 0), Some((20, 40)));
    assert!(spill.bytes() < whole && spill.bytes() > 0);
    assert_eq!(files(dir.path()), 1);
    spill.release("t", 0, 40);
    assert_eq!(spill.range("t", 0), None);
    assert_eq!((spill.bytes(), files(dir.path())), (0, 0));
}

#[test]
fn a_segment_that_does_not_follow_what_is_held_replaces_it() {
    let dir = folder();
    let spill = Spill::create(dir.path(), 1 << 20).unwrap();
    segment(&spill, 0, &[(0, 10)]);
    segment(&spill, 0, &[(30, 40)]);
    assert_eq!(spill.range("t", 0), Some((30, 40)));
    assert_eq!(files(dir.path()), 1);
}

#[test]
fn a_new_spill_empties_its_folder_and_an_empty_segment_leaves_no_file() {
    let dir = folder();
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join("7.spill"), b"from an earlier follower").unwrap();
    let spill = Spill::create(dir.path(), 100).unwrap();
    assert_eq!(files(dir.path()), 0);
    let writer = spill.writer("t", 0).unwrap();
    assert_eq!(spill.keep(writer).unwrap(), 0);
    assert_eq!(files(dir.path()), 0);
    assert!(!spill.full());
}

#[test]
fn a_spill_file_changed_on_disk_fails_its_read_naming_the_file() {
    let dir = folder();
    let spill = Spill::create(dir.path(), 1 << 20).unwrap();
    segment(&spill, 0, &[(0, 10)]);
    let path = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&path, [0u8; HEADER]).unwrap();
    let mut reader = spill.reader("t", 0, 0).unwrap();
    let Err(e) = reader.next_frame() else {
        panic!("a changed frame read back");
    };
    assert_eq!(e.kind, KafkaErrorKind::Spill);
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

#[test]
fn a_fetch_that_did_not_fit_keeps_the_spill_full_until_a_commit_frees_some() {
    let dir = folder();
    let spill = Spill::create(dir.path(), 1 << 20).unwrap();
    segment(&spill, 0, &[(0, 10)]);
    spill.refuse_more();
    assert!(spill.full());
    spill.release("t", 0, 5);
    assert!(spill.full(), "nothing freed");
    spill.release("t", 0, 10);
    assert!(!spill.full());
    spill.refuse_more();
    spill.reopen();
    assert!(!spill.full());
}
