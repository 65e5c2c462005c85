//! Topics the job names that the cluster does not have: a typo in a topic
//! name must not give a green sync of nothing, run after run.
//!
//! A topic is named when `topic_pattern` spells it out (`^(a|b)$`) or when
//! it has a `[[streams]]` entry. With `missing_topics = "fail"` (the
//! default) the sync fails before reading anything, naming each missing
//! topic, the cluster's closest names and the fix; with `"wait"` the other
//! topics are synced and each run warns. A pattern that matches no topic
//! at all warns on every run.

use topicberg_core::config::MissingTopics;
use topicberg_core::near::closest;
use topicberg_core::Job;
use topicberg_kafka::TopicSelection;

use crate::SetupError;

/// The warnings of this selection (missing topics with `wait`, a pattern
/// that matches nothing), each logged (once per follower), or the failure
/// (missing topics with `fail`).
pub fn check_missing_topics(
    job: &Job,
    selection: &TopicSelection,
    logged: Option<&crate::LoggedOnce>,
) -> Result<Vec<String>, SetupError> {
    let warnings = warnings(job, selection)?;
    for warning in &warnings {
        if crate::say(logged, || warning.clone()) {
            tracing::warn!("{warning}");
        }
    }
    Ok(warnings)
}

fn warnings(job: &Job, selection: &TopicSelection) -> Result<Vec<String>, SetupError> {
    let missing = missing(job, selection);
    let existing = || {
        selection
            .selected
            .iter()
            .map(|t| t.name.as_str())
            .chain(selection.skipped.iter().map(String::as_str))
    };
    let mut warnings = Vec::new();
    if !missing.is_empty() {
        let wait = job.source.missing_topics == MissingTopics::Wait;
        let said: Vec<String> = missing
            .iter()
            .map(|topic| describe(topic, closest(topic, existing(), 3), wait))
            .collect();
        if !wait {
            return Err(SetupError::MissingTopics(said));
        }
        warnings.extend(said);
    } else if selection.selected.is_empty() {
        let pattern = job.topics.as_str();
        let count = existing().count();
        warnings.push(format!(
            "topic_pattern \"{pattern}\" matches none of the cluster's {count} topics: nothing \
             was read (a pattern matches anywhere in a name unless anchored with ^ and $)"
        ));
    }
    Ok(warnings)
}

/// The named topics the cluster does not have, sorted.
fn missing(job: &Job, selection: &TopicSelection) -> Vec<String> {
    let selected = |t: &str| selection.selected.iter().any(|s| s.name == t);
    let mut missing = selection.missing.clone();
    for topic in job.stream_topics() {
        if !selected(topic) && !missing.iter().any(|m| m == topic) {
            missing.push(topic.to_owned());
        }
    }
    missing.sort();
    missing
}

/// One missing topic in words, with the closest names and the fix.
fn describe(topic: &str, near: Vec<&str>, wait: bool) -> String {
    let near = match near.as_slice() {
        [] => String::new(),
        names => format!(
            " (closest: {})",
            names
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if wait {
        format!(
            "topic \"{topic}\" does not exist in the cluster{near}; missing_topics = \"wait\": \
             the other topics are synced until it appears"
        )
    } else {
        format!(
            "topic \"{topic}\" does not exist in the cluster{near}; fix its name (in \
             topic_pattern or [[streams]]), create the topic, or set missing_topics = \"wait\" \
             in [source] to sync the other topics until it appears"
        )
    }
}
