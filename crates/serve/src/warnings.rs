//! Warnings shown on a job's page. Retention is the replay window: a job
//! that has not succeeded for a large part of its topics' retention is
//! about to lose messages (the next sync would fail with a retention gap).

use std::time::Duration;

use topicberg_core::Job;
use topicberg_kafka::{select_topics, topic_retention, KafkaConnection};

use crate::runner::TopicsError;

/// The default fraction of the shortest retention after which a job that
/// has not succeeded gets a warning (`topicberg serve
/// --retention-warning-fraction`).
pub const DEFAULT_RETENTION_WARNING_FRACTION: f64 = 0.5;

/// The warning for a job whose last success (or, never having succeeded,
/// its first run) was `since_ms` ago, given its topics' retention
/// (`None`: infinite), if that is more than `fraction` of the shortest.
pub fn retention_warning(
    since_ms: i64,
    retention: &[(String, Option<i64>)],
    fraction: f64,
    succeeded_ever: bool,
) -> Option<String> {
    let (topic, shortest) = retention
        .iter()
        .filter_map(|(t, r)| r.map(|ms| (t, ms)))
        .min_by_key(|(_, ms)| *ms)?;
    if shortest <= 0 || (since_ms as f64) < fraction * shortest as f64 {
        return None;
    }
    let what = if succeeded_ever {
        "No successful sync"
    } else {
        "Never a successful sync"
    };
    Some(format!(
        "{what} for {}, {:.0}% of the shortest retention of its topics ({topic}: {}): \
         messages older than the retention are deleted before this job reads them. \
         Fix the failing sync or sync more often.",
        human(since_ms),
        100.0 * since_ms as f64 / shortest as f64,
        human(shortest)
    ))
}

fn human(ms: i64) -> String {
    let hours = ms as f64 / 3_600_000.0;
    if hours >= 48.0 {
        format!("{:.1} days", hours / 24.0)
    } else if hours >= 1.0 {
        format!("{hours:.1} h")
    } else {
        format!("{:.0} min", ms as f64 / 60_000.0)
    }
}

/// Each selected topic's retention, read from the brokers.
pub async fn job_topic_retention(job: &Job) -> Result<Vec<(String, Option<i64>)>, TopicsError> {
    let connection = KafkaConnection::from_source(&job.source);
    let pattern = job.topics.clone();
    let timeout = Duration::from_secs(10);
    let selected = tokio::task::spawn_blocking({
        let connection = connection.clone();
        move || select_topics(&connection, &pattern, timeout)
    })
    .await
    .map_err(TopicsError::Task)??;
    let topics: Vec<String> = selected.selected.into_iter().map(|t| t.name).collect();
    let retention = topic_retention(&connection, &topics, timeout).await?;
    Ok(retention.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn warns_past_the_fraction_of_the_shortest_retention_only() {
        let retention = vec![
            ("orders".to_string(), Some(10 * HOUR)),
            ("customers".to_string(), Some(4 * HOUR)),
            ("audit".to_string(), None),
        ];
        assert_eq!(retention_warning(HOUR, &retention, 0.5, true), None);
        let w = retention_warning(3 * HOUR, &retention, 0.5, true).unwrap();
        assert!(w.starts_with("No successful sync for 3.0 h, 75%"), "{w}");
        assert!(w.contains("customers: 4.0 h"), "{w}");
        let w = retention_warning(3 * HOUR, &retention, 0.5, false).unwrap();
        assert!(w.starts_with("Never a successful sync"), "{w}");
        // Infinite retention everywhere: nothing to lose.
        let forever = vec![("audit".to_string(), None)];
        assert_eq!(retention_warning(1000 * HOUR, &forever, 0.5, true), None);
    }
}
