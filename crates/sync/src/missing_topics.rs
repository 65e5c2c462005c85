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
/// that matches nothing), each logged (once per follower: keyed by the
/// topic, not by the text, whose closest names change), or the failure
/// (missing topics with `fail`). `policy` overrides the job's
/// `missing_topics`: a follower past its first round waits (a topic
/// deleted under a running follower must not stop its other topics).
pub fn check_missing_topics(
    job: &Job,
    policy: Option<MissingTopics>,
    selection: &TopicSelection,
    logged: Option<&crate::LoggedOnce>,
) -> Result<Vec<String>, SetupError> {
    let policy = policy.unwrap_or(job.source.missing_topics);
    let warnings = warnings(job, policy, selection)?;
    for (key, warning) in &warnings {
        if crate::say(logged, || key.clone()) {
            tracing::warn!("{warning}");
        }
    }
    Ok(warnings.into_iter().map(|(_, w)| w).collect())
}

/// `(log key, text)` of each warning.
fn warnings(
    job: &Job,
    policy: MissingTopics,
    selection: &TopicSelection,
) -> Result<Vec<(String, String)>, SetupError> {
    let missing = missing(job, selection);
    let existing = || {
        selection
            .selected
            .iter()
            .map(|t| t.name.as_str())
            .chain(selection.skipped.iter().map(String::as_str))
    };
    let wait = policy == MissingTopics::Wait;
    if !missing.is_empty() {
        let said = missing.iter().map(|topic| {
            let text = describe(topic, closest(topic, existing(), 3), wait);
            (format!("missing topic {topic}"), text)
        });
        if !wait {
            return Err(SetupError::MissingTopics(said.map(|(_, t)| t).collect()));
        }
        return Ok(said.collect());
    }
    if !selection.selected.is_empty() {
        return Ok(Vec::new());
    }
    let pattern = job.topics.as_str();
    let count = existing().count();
    Ok(vec![(
        format!("pattern {pattern} matches nothing"),
        format!(
            "topic_pattern \"{pattern}\" matches none of the cluster's {count} topics: nothing \
             was read (a pattern matches anywhere in a name unless anchored with ^ and $)"
        ),
    )])
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

#[cfg(test)]
mod tests {
    use topicberg_kafka::SelectedTopic;

    use super::*;

    fn job(source: &str, streams: &str) -> Job {
        let text =
            format!("name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\n{source}\n{streams}");
        Job::resolve(&topicberg_core::JobConfig::from_toml_str(&text, |_| None).unwrap()).unwrap()
    }

    fn selection(selected: &[&str], skipped: &[&str]) -> TopicSelection {
        TopicSelection {
            selected: selected
                .iter()
                .map(|t| SelectedTopic {
                    name: (*t).to_owned(),
                    partitions: vec![0],
                })
                .collect(),
            skipped: skipped.iter().map(|t| (*t).to_owned()).collect(),
            missing: Vec::new(),
        }
    }

    const STREAMS: &str = "[[streams]]\ntopic = \"orders\"\n[[streams]]\ntopic = \"ordres_eu\"\n";

    #[test]
    fn a_missing_stream_topic_fails_naming_the_closest_unless_waited_for() {
        let found = selection(&["orders"], &["orders_eu"]);
        let e = check_missing_topics(&job("", STREAMS), None, &found, None).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(
                "topic \"ordres_eu\" does not exist in the cluster (closest: \"orders_eu\")"
            ),
            "{text}"
        );
        let waiting = job("missing_topics = \"wait\"", STREAMS);
        let warnings = check_missing_topics(&waiting, None, &found, None).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        // A follower past its first round waits whatever the job says.
        let followed =
            check_missing_topics(&job("", STREAMS), Some(MissingTopics::Wait), &found, None);
        assert_eq!(followed.unwrap().len(), 1);
    }

    #[test]
    fn a_pattern_matching_nothing_warns_and_one_matching_something_does_not() {
        let pattern = job("topic_pattern = \"^shop[.]\"", "");
        let none =
            check_missing_topics(&pattern, None, &selection(&[], &["a", "b"]), None).unwrap();
        assert_eq!(none.len(), 1);
        assert!(
            none[0].contains("matches none of the cluster's 2 topics"),
            "{none:?}"
        );
        let some = check_missing_topics(&pattern, None, &selection(&["shop.x"], &[]), None);
        assert!(some.unwrap().is_empty());
    }
}
