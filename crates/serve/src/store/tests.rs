//! The store against a temporary SQLite file.

use super::*;
use crate::run_store::{FinishedRun, RunKind, RunStatus, RunStore, Trigger};

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topicberg-store-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn rows_survive_reopening_and_runs_are_recorded() {
    let dir = temp_dir();
    let store = Store::open(&dir).unwrap();
    let src: Piece =
        serde_json::from_str(r#"{"bootstrap_servers":"b:1","topic_pattern":"^t$"}"#).unwrap();
    let sid = store.insert_piece(PieceKind::Source, "s", &src).unwrap();
    let did = store
        .insert_piece(PieceKind::Destination, "d", &Piece::new())
        .unwrap();
    assert!(matches!(
        store.insert_piece(PieceKind::Source, "s", &src),
        Err(StoreError::Conflict(_))
    ));
    let job = JobRow {
        id: 0,
        name: "j".into(),
        source_id: sid,
        destination_id: did,
        target_engines: vec!["spark".into()],
        namespace: None,
        sync: Piece::new(),
        streams: vec![],
        schedule: "every 5 minutes".into(),
        paused: false,
        maintain: serde_json::from_value(serde_json::json!({"keep_snapshots": 3})).unwrap(),
        maintain_schedule: "daily at 03:00".into(),
        mode: crate::run_store::JobMode::Scheduled,
    };
    let jid = store.insert_job(&job).unwrap();
    let run = store
        .insert_run(jid, RunKind::Sync, Trigger::Manual, 1000)
        .unwrap();
    store
        .finish_run(&FinishedRun {
            run_id: run,
            status: RunStatus::Succeeded,
            finished_ms: 2000,
            error: None,
            report_json: Some(r#"{"tables":[]}"#.into()),
            log: "line\n".into(),
            lag: Some(42),
        })
        .unwrap();
    assert!(matches!(
        store.delete_piece(PieceKind::Source, sid),
        Err(StoreError::Conflict(_))
    ));
    drop(store);
    let store = Store::open(&dir).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(DB_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert_eq!(store.job(jid).unwrap().schedule, "every 5 minutes");
    let kept = store.job(jid).unwrap();
    assert_eq!(kept.maintain_schedule, "daily at 03:00");
    assert_eq!(
        kept.maintain["keep_snapshots"], 3,
        "the [maintain] table is kept"
    );
    let timers = store.schedules().unwrap();
    assert_eq!(
        timers
            .iter()
            .map(|j| (j.kind, j.schedule.as_str(), j.last_started_ms))
            .collect::<Vec<_>>(),
        [
            (RunKind::Sync, "every 5 minutes", Some(1000)),
            (RunKind::Maintain, "daily at 03:00", None)
        ],
        "a sync timer and a maintenance timer, each with its own last start"
    );
    let runs = store.runs(jid, 10).unwrap();
    assert_eq!(runs[0].status, "succeeded");
    assert_eq!(runs[0].lag, Some(42), "the lag after the run is kept");
    // Pages of the history: the offset skips the newest.
    assert_eq!(store.runs_page(jid, 1, 0).unwrap().len(), 1);
    assert!(store.runs_page(jid, 1, 1).unwrap().is_empty());
    assert_eq!(store.run_log(run).unwrap(), "line\n");
    let scheduled = store.schedules().unwrap();
    assert_eq!(scheduled[0].last_started_ms, Some(1000));
    // A continuous job: its mode is kept, and its follower replaces the
    // sync timer (the maintenance timer stays).
    let mut continuous = store.job(jid).unwrap();
    continuous.mode = crate::run_store::JobMode::Continuous;
    store.update_job(&continuous).unwrap();
    assert_eq!(
        store.job(jid).unwrap().mode,
        crate::run_store::JobMode::Continuous
    );
    let kinds: Vec<RunKind> = store.schedules().unwrap().iter().map(|j| j.kind).collect();
    assert_eq!(
        kinds,
        [RunKind::Maintain],
        "no sync timer for a continuous job"
    );
    let toml = store.job_toml(jid).unwrap();
    topicberg_core::JobConfig::from_toml_str(&toml, |_| None).unwrap();
    store.delete_job(jid).unwrap();
    assert!(matches!(store.run(run), Err(StoreError::NotFound(_))));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every byte of the database and its WAL.
fn file_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for suffix in ["", "-wal", "-journal"] {
        if let Ok(b) = std::fs::read(dir.join(format!("{DB_FILE}{suffix}"))) {
            all.extend(b);
        }
    }
    all
}

#[test]
fn a_removed_or_replaced_secret_is_gone_from_the_files() {
    let dir = temp_dir();
    let store = Store::open(&dir).unwrap();
    let secret = "it-secret-7Qx2-removed";
    let replaced = "it-secret-9Vb4-replaced";
    let piece = |v: serde_json::Value| -> Piece { serde_json::from_value(v).unwrap() };
    let with = piece(serde_json::json!({"bootstrap_servers": "b:1", "sasl_password": secret}));
    let id = store.insert_piece(PieceKind::Source, "s", &with).unwrap();
    let other = piece(serde_json::json!({"bootstrap_servers": "b:1", "sasl_password": replaced}));
    let other_id = store.insert_piece(PieceKind::Source, "t", &other).unwrap();
    let has = |needle: &str| {
        let bytes = file_bytes(&dir);
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    assert!(has(secret));
    let without = piece(serde_json::json!({"bootstrap_servers": "b:1"}));
    store
        .update_piece(PieceKind::Source, id, "s", &without)
        .unwrap();
    store.delete_piece(PieceKind::Source, other_id).unwrap();
    assert!(!has(secret), "the removed secret is still in the files");
    assert!(
        !has(replaced),
        "the deleted piece's secret is still in the files"
    );
}
