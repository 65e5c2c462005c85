//! Job schedules, in UTC: cron expressions and presets, the next run time,
//! and the loop that starts due runs.
//!
//! Accepted schedules (see [`Schedule::parse`]):
//! - empty: manual runs only;
//! - cron with 5 fields `minute hour day-of-month month day-of-week` or 6
//!   with seconds first; day of week as in Unix cron (`0` or `7` = Sunday,
//!   `1` = Monday, names `MON`-`SUN`); `@hourly`, `@daily`, `@weekly`,
//!   `@monthly`, `@yearly`;
//! - `every N minutes`, `every N hours` (slots aligned to the Unix epoch:
//!   `every 15 minutes` runs at :00, :15, :30, :45), `every minute`,
//!   `every hour`, `hourly`;
//! - `daily at HH:MM` or `daily at HH`.
//!
//! The loop keeps no state on disk: after a restart the next run comes
//! from the schedule, and a job whose slot passed since its last run (as
//! the store recorded it) while the service was down runs once at start.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Days, NaiveTime, TimeZone, Utc};
use tokio::task::JoinHandle;

pub use error::{DayOfWeekError, ScheduleError};

use crate::run_store::{RunKind, RunStore, ScheduledJob, Trigger};
use crate::runner::{Runner, StartError};

mod error;

/// The longest the loop sleeps, so new and edited schedules are picked up.
pub const RESCAN_INTERVAL: Duration = Duration::from_secs(30);

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// No schedule: manual runs only.
    Manual,
    /// Every `seconds`, at multiples of it since the Unix epoch.
    Every {
        /// The period in seconds.
        seconds: i64,
    },
    /// Once a day at `time` (UTC).
    Daily {
        /// The time of day.
        time: NaiveTime,
    },
    /// A cron expression (already in the `cron` crate's form).
    Cron(Box<cron::Schedule>),
}

impl Schedule {
    /// Parses a schedule; the error says what is wrong and how to write it.
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Schedule::Manual);
        }
        let lower = text.to_ascii_lowercase();
        let words: Vec<&str> = lower.split_whitespace().collect();
        match words.as_slice() {
            ["hourly"] | ["every", "hour"] => return Ok(Schedule::Every { seconds: 3600 }),
            ["every", "minute"] => return Ok(Schedule::Every { seconds: 60 }),
            ["every", n, unit] => return parse_every(text, n, unit),
            ["daily", "at", time] => return parse_daily(text, time),
            ["every", ..] | ["daily", ..] => {
                let text = text.to_string();
                return Err(ScheduleError::NotASchedule { text });
            }
            _ => {}
        }
        if text.starts_with('@') {
            return cron::Schedule::from_str(&lower)
                .map(|s| Schedule::Cron(Box::new(s)))
                .map_err(|source| ScheduleError::Preset {
                    text: text.to_string(),
                    source,
                });
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        let (seconds, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            fields => {
                let text = text.to_string();
                return Err(ScheduleError::FieldCount { text, fields });
            }
        };
        let dow = cron_day_of_week(rest[4]).map_err(|source| ScheduleError::DayOfWeek {
            text: text.to_string(),
            source,
        })?;
        let expression = format!(
            "{seconds} {} {} {} {} {dow}",
            rest[0], rest[1], rest[2], rest[3]
        );
        cron::Schedule::from_str(&expression)
            .map(|s| Schedule::Cron(Box::new(s)))
            .map_err(|source| ScheduleError::Cron {
                text: text.to_string(),
                source,
            })
    }

    /// The first time strictly after `after` this schedule starts a run;
    /// `None` for manual-only schedules (or a cron with no future time).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Manual => None,
            Schedule::Every { seconds } => {
                let t = after.timestamp();
                let next = (t.div_euclid(*seconds) + 1) * seconds;
                Utc.timestamp_opt(next, 0).single()
            }
            Schedule::Daily { time } => {
                let today = after.date_naive().and_time(*time).and_utc();
                if today > after {
                    Some(today)
                } else {
                    today.checked_add_days(Days::new(1))
                }
            }
            Schedule::Cron(cron) => cron.after(&after).next(),
        }
    }
}

fn parse_every(text: &str, n: &str, unit: &str) -> Result<Schedule, ScheduleError> {
    let text = || text.to_string();
    let unit_seconds = match unit {
        "minute" | "minutes" | "min" | "mins" => 60,
        "hour" | "hours" => 3600,
        _ => return Err(ScheduleError::EveryUnit { text: text() }),
    };
    let n: i64 = n.parse().map_err(|_| ScheduleError::EveryNotWhole {
        text: text(),
        n: n.to_string(),
    })?;
    if !(1..=10_000).contains(&n) {
        return Err(ScheduleError::EveryOutOfRange { text: text() });
    }
    Ok(Schedule::Every {
        seconds: n * unit_seconds,
    })
}

fn parse_daily(text: &str, time: &str) -> Result<Schedule, ScheduleError> {
    let (h, m) = time.split_once(':').unwrap_or((time, "00"));
    let number = |s: &str| {
        (!s.is_empty() && s.len() <= 2 && s.chars().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    match (number(h), number(m)) {
        (Some(h), Some(m)) => NaiveTime::from_hms_opt(h, m, 0),
        _ => None,
    }
    .map(|time| Schedule::Daily { time })
    .ok_or_else(|| ScheduleError::DailyTime {
        text: text.to_string(),
    })
}

/// Unix cron's day-of-week field (0-7, 0 and 7 = Sunday) in the `cron`
/// crate's numbering (1-7, 1 = Sunday). Names and `*`/`?` pass through.
fn cron_day_of_week(field: &str) -> Result<String, DayOfWeekError> {
    if field == "*" || field == "?" {
        return Ok(field.to_string());
    }
    let mut days: Vec<u32> = Vec::new();
    let mut named: Vec<&str> = Vec::new();
    for part in field.split(',') {
        if part.chars().any(|c| c.is_ascii_alphabetic()) {
            named.push(part);
            continue;
        }
        let (base, step) = match part.split_once('/') {
            Some((b, s)) => (b, Some(s)),
            None => (part, None),
        };
        let step: u32 = match step {
            Some(s) => s
                .parse()
                .ok()
                .filter(|s| *s > 0)
                .ok_or_else(|| DayOfWeekError::Step {
                    part: part.to_string(),
                })?,
            None => 1,
        };
        let number = |s: &str| -> Result<u32, DayOfWeekError> {
            s.parse::<u32>()
                .ok()
                .filter(|n| *n <= 7)
                .ok_or_else(|| DayOfWeekError::OutOfRange {
                    part: part.to_string(),
                })
        };
        let (from, to) = match base.split_once('-') {
            _ if base == "*" => (0, 6),
            Some((a, b)) => (number(a)?, number(b)?),
            None if step > 1 || part.contains('/') => (number(base)?, 6),
            None => (number(base)?, number(base)?),
        };
        if from > to {
            return Err(DayOfWeekError::Downwards {
                part: part.to_string(),
            });
        }
        days.extend((from..=to).step_by(step as usize).map(|d| d % 7 + 1));
    }
    days.sort_unstable();
    days.dedup();
    let mut parts: Vec<String> = days.iter().map(u32::to_string).collect();
    parts.extend(named.iter().map(|s| s.to_string()));
    Ok(parts.join(","))
}

/// `Ok` when `text` is a schedule; otherwise what is wrong and how to fix it.
pub fn validate_schedule(text: &str) -> Result<(), ScheduleError> {
    Schedule::parse(text).map(|_| ())
}

/// When `text` next starts a run after `after`; `None` for an empty (manual)
/// or invalid schedule.
pub fn next_run(text: &str, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    Schedule::parse(text).ok()?.next_after(after)
}

/// One job's timer in the loop.
struct Timer {
    text: String,
    schedule: Option<Schedule>,
    next: Option<DateTime<Utc>>,
}

/// The loop's memory of each job's next runs (its sync's and its
/// maintenance's); a pure state machine over (jobs, now) so it can be
/// tested with a fake clock.
#[derive(Default)]
pub(crate) struct Timers {
    timers: HashMap<(i64, RunKind), Timer>,
    started: bool,
}

/// A run the schedules want started now.
pub(crate) type Due = (i64, RunKind, Trigger);

impl Timers {
    /// The runs to start at `now`. The first call (service start) also
    /// returns, once, a [`Trigger::Missed`] run for every job whose slot
    /// passed since its last run. A job's new or changed schedule counts
    /// from `now`; a slot that finds its job paused or running is skipped.
    pub(crate) fn tick(
        &mut self,
        jobs: &[ScheduledJob],
        now: DateTime<Utc>,
        running: &dyn Fn(i64) -> bool,
    ) -> Vec<Due> {
        let at_start = !self.started;
        self.started = true;
        self.timers
            .retain(|key, _| jobs.iter().any(|j| (j.job_id, j.kind) == *key));
        let mut due = Vec::new();
        for job in jobs {
            let key = (job.job_id, job.kind);
            let changed = self.timers.get(&key).is_none_or(|t| t.text != job.schedule);
            if changed {
                let schedule = match Schedule::parse(&job.schedule) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(job = %job.job_name, error = %e, "invalid schedule; the job runs only by hand");
                        None
                    }
                };
                let next = schedule.as_ref().and_then(|s| s.next_after(now));
                if at_start && !job.paused && !running(job.job_id) {
                    let missed = job
                        .last_started_ms
                        .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
                        .and_then(|last| schedule.as_ref()?.next_after(last))
                        .is_some_and(|slot| slot <= now);
                    if missed {
                        due.push((job.job_id, job.kind, Trigger::Missed));
                    }
                }
                self.timers.insert(
                    key,
                    Timer {
                        text: job.schedule.clone(),
                        schedule,
                        next,
                    },
                );
                continue;
            }
            let timer = self.timers.get_mut(&key).expect("timer");
            if timer.next.is_some_and(|next| next <= now) {
                if job.paused {
                    tracing::debug!(job = %job.job_name, "scheduled slot skipped: paused");
                } else if running(job.job_id) {
                    tracing::info!(job = %job.job_name, "scheduled slot skipped: the previous run is still going");
                } else {
                    due.push((job.job_id, job.kind, Trigger::Schedule));
                }
                timer.next = timer.schedule.as_ref().and_then(|s| s.next_after(now));
            }
        }
        due
    }

    /// How long to sleep from `now`: until the next due time, at most
    /// [`RESCAN_INTERVAL`].
    pub(crate) fn sleep_for(&self, now: DateTime<Utc>) -> Duration {
        self.timers
            .values()
            .filter_map(|t| t.next)
            .min()
            .map(|next| (next - now).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(RESCAN_INTERVAL)
            .clamp(Duration::from_millis(10), RESCAN_INTERVAL)
    }
}

/// Starts the scheduler loop: reads the store's schedules, starts due runs
/// through `runner`, sleeps until the next due time (at most
/// [`RESCAN_INTERVAL`]); ends when `shutdown` turns true or its sender is
/// dropped.
pub fn spawn_scheduler(
    store: Arc<dyn RunStore>,
    runner: Runner,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut timers = Timers::default();
        loop {
            if *shutdown.borrow() {
                break;
            }
            let store = Arc::clone(&store);
            let jobs = tokio::task::spawn_blocking(move || store.schedules()).await;
            match jobs {
                Ok(Ok(jobs)) => {
                    let due = timers.tick(&jobs, Utc::now(), &|id| runner.is_running(id));
                    for (job_id, kind, trigger) in due {
                        let name = jobs
                            .iter()
                            .find(|j| j.job_id == job_id)
                            .map_or("", |j| j.job_name.as_str());
                        match runner.start_run(job_id, kind, trigger) {
                            Ok(run_id) => tracing::info!(
                                job = %name, run_id, kind = kind.as_str(), trigger = trigger.as_str(),
                                "scheduled run started"
                            ),
                            Err(StartError::AlreadyRunning) => tracing::info!(
                                job = %name, "scheduled slot skipped: the job is running"
                            ),
                            Err(e) => tracing::error!(
                                job = %name, error = %e, "starting a scheduled run failed"
                            ),
                        }
                    }
                }
                Ok(Err(e)) => tracing::error!(error = %e, "reading the schedules failed; retrying"),
                Err(e) => tracing::error!(error = %e, "reading the schedules panicked; retrying"),
            }
            let wait = timers.sleep_for(Utc::now());
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = runner.schedule_change() => {}
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        tracing::info!("scheduler stopped");
    })
}

#[cfg(test)]
mod tests;
