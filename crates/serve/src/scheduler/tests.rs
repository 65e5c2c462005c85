use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn next(schedule: &str, after: &str) -> String {
    next_run(schedule, at(after))
        .unwrap_or_else(|| panic!("{schedule} has a next run"))
        .to_rfc3339()
}

#[test]
fn presets_compute_their_next_run_in_utc() {
    // 2026-11-29 is a Sunday.
    let t = "2026-11-29T20:07:30+00:00";
    assert_eq!(next("every 15 minutes", t), "2026-11-29T20:15:00+00:00");
    assert_eq!(next("every 1 minutes", t), "2026-11-29T20:08:00+00:00");
    assert_eq!(next("every minute", t), "2026-11-29T20:08:00+00:00");
    assert_eq!(next("Every 2 Hours", t), "2026-11-29T22:00:00+00:00");
    assert_eq!(next("hourly", t), "2026-11-29T21:00:00+00:00");
    assert_eq!(next("daily at 02:30", t), "2026-11-30T02:30:00+00:00");
    assert_eq!(next("daily at 23", t), "2026-11-29T23:00:00+00:00");
    assert_eq!(next("daily at 20:07", t), "2026-11-30T20:07:00+00:00");
    // Strictly after: a time on a slot gives the following slot.
    assert_eq!(
        next("every 15 minutes", "2026-11-29T20:15:00Z"),
        "2026-11-29T20:30:00+00:00"
    );
    assert_eq!(
        next("daily at 02:30", "2026-11-30T02:30:00Z"),
        "2026-12-01T02:30:00+00:00"
    );
    assert_eq!(next_run("", at(t)), None, "empty: manual only");
    assert_eq!(next_run("   ", at(t)), None);
}

#[test]
fn cron_has_five_or_six_fields_and_unix_days_of_week() {
    let sunday = "2026-11-29T20:07:30Z";
    assert_eq!(next("30 2 * * *", sunday), "2026-11-30T02:30:00+00:00");
    assert_eq!(next("*/10 * * * *", sunday), "2026-11-29T20:10:00+00:00");
    // 6 fields: seconds first.
    assert_eq!(next("45 7 20 * * *", sunday), "2026-11-29T20:07:45+00:00");
    // Unix days of week: 1-5 is Monday to Friday, 0 and 7 are Sunday.
    assert_eq!(next("0 9 * * 1-5", sunday), "2026-11-30T09:00:00+00:00");
    assert_eq!(
        next("0 9 * * 1-5", "2026-12-04T10:00:00Z"),
        "2026-12-07T09:00:00+00:00",
        "Friday after 9: next Monday"
    );
    assert_eq!(next("0 9 * * 6", sunday), "2026-12-05T09:00:00+00:00");
    assert_eq!(next("0 21 * * 0", sunday), "2026-11-29T21:00:00+00:00");
    assert_eq!(next("0 21 * * 7", sunday), "2026-11-29T21:00:00+00:00");
    assert_eq!(next("0 9 * * 5-7", sunday), "2026-12-04T09:00:00+00:00");
    assert_eq!(next("0 9 * * MON", sunday), "2026-11-30T09:00:00+00:00");
    assert_eq!(
        next("0 9 * * */2", sunday),
        "2026-12-01T09:00:00+00:00",
        "Sun, Tue, Thu, Sat"
    );
    assert_eq!(next("@daily", sunday), "2026-11-30T00:00:00+00:00");
}

#[test]
fn invalid_schedules_say_how_to_fix_them() {
    let cases = [
        ("every 0 minutes", "between 1 and 10000"),
        ("every five minutes", "not a whole number"),
        ("every 5 days", "minutes or hours"),
        ("daily at 25:00", "HH:MM"),
        ("daily at 2:75", "minutes 0-59"),
        ("daily", "not a schedule"),
        ("* * * *", "has 4 fields"),
        ("tomorrow", "has 1 field:"),
        ("0 9 * * 8", "0-7 (0 or 7 = Sunday"),
        ("0 9 * * 5-1", "upwards"),
        ("0 61 * * * *", "not a valid cron expression"),
        ("61 * * * *", "not a valid cron expression"),
    ];
    for (text, wanted) in cases {
        let e = validate_schedule(text).expect_err(text).to_string();
        assert!(e.contains(wanted), "{text}: {e}");
        assert!(
            e.contains(text.trim()),
            "the message names the schedule: {e}"
        );
    }
    let e = validate_schedule("tomorrow").unwrap_err().to_string();
    assert!(
        e.contains("every 15 minutes") && e.contains("daily at 02:30") && e.contains("5 fields"),
        "{e}"
    );
    for ok in [
        "",
        "every 5 minutes",
        "daily at 7",
        "0 */2 * * *",
        "0 0 3 * * SUN",
    ] {
        assert!(validate_schedule(ok).is_ok(), "{ok}");
    }
}

fn job(id: i64, schedule: &str, last: Option<&str>) -> ScheduledJob {
    ScheduledJob {
        job_id: id,
        job_name: format!("job{id}"),
        kind: RunKind::Sync,
        schedule: schedule.to_string(),
        paused: false,
        last_started_ms: last.map(|t| at(t).timestamp_millis()),
    }
}

#[test]
fn a_run_missed_while_down_runs_once_at_start() {
    let mut timers = Timers::default();
    let jobs = vec![
        // Last ran 3 hours ago: three hourly slots missed -> one run.
        job(1, "hourly", Some("2026-11-29T17:00:00Z")),
        // Last ran after its latest slot: nothing missed.
        job(2, "hourly", Some("2026-11-29T20:00:01Z")),
        // Never ran: waits for its first slot.
        job(3, "hourly", None),
        // Manual only.
        job(4, "", Some("2020-01-01T00:00:00Z")),
        // Paused: no missed run.
        ScheduledJob {
            paused: true,
            ..job(5, "hourly", Some("2026-11-28T00:00:00Z"))
        },
        // Running already.
        job(6, "hourly", Some("2026-11-28T00:00:00Z")),
    ];
    let now = at("2026-11-29T20:30:00Z");
    let due = timers.tick(&jobs, now, &|id| id == 6);
    assert_eq!(due, vec![(1, RunKind::Sync, Trigger::Missed)]);
    // The next pass, a second later: nothing (not once per missed slot).
    let due = timers.tick(&jobs, at("2026-11-29T20:30:01Z"), &|_| false);
    assert_eq!(due, vec![]);
    // Sleep until the next slot (21:00), capped.
    assert_eq!(
        timers.sleep_for(at("2026-11-29T20:59:50Z")),
        Duration::from_secs(10)
    );
    assert_eq!(timers.sleep_for(now), RESCAN_INTERVAL);
    // At 21:00 every unpaused hourly job not running is due.
    let due = timers.tick(&jobs, at("2026-11-29T21:00:00.200Z"), &|id| id == 2);
    assert_eq!(
        due,
        vec![
            (1, RunKind::Sync, Trigger::Schedule),
            (3, RunKind::Sync, Trigger::Schedule),
            (6, RunKind::Sync, Trigger::Schedule)
        ]
    );
    let due = timers.tick(&jobs, at("2026-11-29T21:00:05Z"), &|_| false);
    assert_eq!(
        due,
        vec![],
        "a slot starts one run; job 2's slot was skipped, not queued"
    );
}

#[test]
fn new_and_edited_schedules_count_from_now_and_removed_jobs_are_forgotten() {
    let mut timers = Timers::default();
    let t0 = at("2026-11-29T20:00:30Z");
    assert_eq!(timers.tick(&[], t0, &|_| false), vec![]);
    // A job created later with an old last run gets no missed run.
    let mut jobs = vec![job(1, "every 5 minutes", Some("2026-11-01T00:00:00Z"))];
    assert_eq!(
        timers.tick(&jobs, at("2026-11-29T20:01:00Z"), &|_| false),
        vec![]
    );
    assert_eq!(
        timers.tick(&jobs, at("2026-11-29T20:05:00Z"), &|_| false),
        vec![(1, RunKind::Sync, Trigger::Schedule)]
    );
    // Edited to daily: the 20:10 slot no longer applies.
    jobs[0].schedule = "daily at 03:00".into();
    assert_eq!(
        timers.tick(&jobs, at("2026-11-29T20:06:00Z"), &|_| false),
        vec![]
    );
    assert_eq!(
        timers.tick(&jobs, at("2026-11-29T20:10:00Z"), &|_| false),
        vec![]
    );
    assert_eq!(
        timers.tick(&jobs, at("2026-11-30T03:00:00Z"), &|_| false),
        vec![(1, RunKind::Sync, Trigger::Schedule)]
    );
    // Paused: its slot passes without a run, and is not made up on resume.
    jobs[0].paused = true;
    assert_eq!(
        timers.tick(&jobs, at("2026-12-01T03:00:00Z"), &|_| false),
        vec![]
    );
    jobs[0].paused = false;
    assert_eq!(
        timers.tick(&jobs, at("2026-12-01T03:00:10Z"), &|_| false),
        vec![]
    );
    // An invalid schedule starts nothing; deleting the job forgets it.
    jobs.push(job(2, "every 0 minutes", None));
    assert_eq!(
        timers.tick(&jobs, at("2026-12-02T03:00:00Z"), &|_| false),
        vec![(1, RunKind::Sync, Trigger::Schedule)]
    );
    assert_eq!(timers.timers.len(), 2);
    assert_eq!(
        timers.tick(&[], at("2026-12-02T03:00:01Z"), &|_| false),
        vec![]
    );
    assert!(timers.timers.is_empty());
    assert_eq!(
        timers.sleep_for(t0),
        RESCAN_INTERVAL,
        "no timers: the rescan cap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_starts_a_missed_run_at_start_and_stops_on_shutdown() {
    use crate::metrics::Metrics;
    use crate::runner::test_store::MemoryStore;

    let store = Arc::new(MemoryStore::default());
    // An hourly job that last ran two hours ago (its file is incomplete:
    // the run fails at once, which is all this test needs).
    let job_id = store.add_job(
        "hourly",
        Some(crate::runner::now_ms() - 2 * 3600 * 1000),
        "name = \"missed\"\n",
    );
    let runner = Runner::new(store.clone(), Metrics::default());
    let (tx, rx) = tokio::sync::watch::channel(false);
    let handle = spawn_scheduler(store.clone(), runner.clone(), rx);
    let started = std::time::Instant::now();
    while store.runs_of(job_id).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no missed run started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the loop ends promptly on shutdown")
        .unwrap();
    runner.wait_idle().await;
    let runs = store.runs_of(job_id);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].trigger, Trigger::Missed);
}

#[test]
fn a_jobs_maintenance_schedule_runs_beside_its_sync_schedule() {
    let mut timers = Timers::default();
    let sync = job(1, "every 15 minutes", None);
    let maintain = ScheduledJob {
        kind: RunKind::Maintain,
        schedule: "daily at 03:00".into(),
        ..job(1, "", None)
    };
    let jobs = vec![sync, maintain];
    assert!(timers
        .tick(&jobs, at("2026-11-30T02:50:00Z"), &|_| false)
        .is_empty());
    assert_eq!(
        timers.tick(&jobs, at("2026-11-30T03:00:00Z"), &|_| false),
        vec![
            (1, RunKind::Sync, Trigger::Schedule),
            (1, RunKind::Maintain, Trigger::Schedule)
        ]
    );
    // The next slot of each is its own: the sync's at 03:15, the
    // maintenance's the next day.
    assert_eq!(
        timers.tick(&jobs, at("2026-11-30T03:15:00Z"), &|_| false),
        vec![(1, RunKind::Sync, Trigger::Schedule)]
    );
    // A missed maintenance slot (its last run before yesterday's 03:00)
    // runs once at start, and only the maintenance.
    let mut fresh = Timers::default();
    let jobs = vec![
        job(1, "every 15 minutes", Some("2026-11-30T03:14:00Z")),
        ScheduledJob {
            kind: RunKind::Maintain,
            schedule: "daily at 03:00".into(),
            ..job(1, "", Some("2026-11-28T03:00:00Z"))
        },
    ];
    assert_eq!(
        fresh.tick(&jobs, at("2026-11-30T03:14:30Z"), &|_| false),
        vec![(1, RunKind::Maintain, Trigger::Missed)]
    );
}
