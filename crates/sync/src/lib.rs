//! topicberg's commands as a library: the CLI (`main.rs`) and, later, the
//! service call these.
//!
//! - [`check`]: every step a sync needs, tried for real.
//! - [`discover`]: the selected topics and their inferred columns.
//! - [`sync`]: one bounded, exactly-once sync.

pub mod check;
mod columns;
pub mod discover;
pub mod log_writer;
pub mod sync;
pub mod target;

use regex::Regex;
use topicberg_core::JobConfig;

use crate::target::SetupError;

/// The regex that selects topics: `topic_pattern`, or exactly the
/// `[[streams]]` topics when there is none.
pub fn topic_pattern(config: &JobConfig) -> Result<Regex, SetupError> {
    let text = match &config.source.topic_pattern {
        Some(p) => p.clone(),
        None => format!(
            "^({})$",
            config
                .streams
                .iter()
                .map(|s| regex::escape(&s.topic))
                .collect::<Vec<_>>()
                .join("|")
        ),
    };
    Regex::new(&text).map_err(|e| SetupError::Unsupported(format!("source.topic_pattern: {e}")))
}

/// Refuses a selection in which two topics would be written into one
/// table (`a.b-c` and `a_b_c` both become table `a_b_c`): their rows would
/// mix and their offsets records collide. Names every clash and the fix.
pub fn check_table_collisions<'a>(
    config: &JobConfig,
    topics: impl IntoIterator<Item = &'a str>,
) -> Result<(), SetupError> {
    let topics: Vec<&str> = topics.into_iter().collect();
    let problems = config.table_conflicts(&topics);
    if problems.is_empty() {
        return Ok(());
    }
    let problems: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
    Err(SetupError::TableCollision(format!(
        "{}; nothing was read or written",
        problems.join("; ")
    )))
}

/// Logs every topic the pattern leaves out, as the product pages' users
/// expect to see it.
pub fn log_skipped(config: &JobConfig, skipped: &[String]) {
    let pattern = config.source.topic_pattern.clone().unwrap_or_default();
    for topic in skipped {
        tracing::info!("Skipping topic {topic} (does not match topic_pattern: {pattern})");
    }
}
