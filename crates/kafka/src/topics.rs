//! Which topics a job reads: every topic the credentials can see whose name
//! the job's `topic_pattern` matches in full (the user anchors it).

use std::time::Duration;

use regex::Regex;

use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// A topic the job selected, with its partition ids in ascending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedTopic {
    /// The topic name.
    pub name: String,
    /// Partition ids, ascending.
    pub partitions: Vec<i32>,
}

/// The outcome of matching the cluster's topics against a pattern.
#[derive(Debug, Clone, Default)]
pub struct TopicSelection {
    /// Topics that match, sorted by name.
    pub selected: Vec<SelectedTopic>,
    /// Topics that do not match, sorted by name (internal topics excluded).
    pub skipped: Vec<String>,
}

/// Lists the cluster's topics and splits them by `pattern`. Wrong
/// credentials fail fast with [`KafkaErrorKind::Authentication`].
///
/// Internal topics (`__consumer_offsets`, `__transaction_state`, ...) are
/// never selected nor reported as skipped.
pub fn select_topics(
    connection: &KafkaConnection,
    pattern: &Regex,
    timeout: Duration,
) -> Result<TopicSelection, KafkaError> {
    // Asked like `check`'s ping, so that a refused login fails in seconds
    // with the user and mechanism named, not as a transport failure at the
    // deadline.
    let metadata = crate::ping::fetch_metadata(connection, timeout, "listing topics")?;
    let mut selection = TopicSelection::default();
    for topic in metadata.topics() {
        let name = topic.name();
        if name.starts_with("__") {
            continue;
        }
        if let Some(err) = topic.error() {
            return Err(KafkaError::new(
                KafkaErrorKind::Broker,
                format!("describing topic {name}"),
                rdkafka::types::RDKafkaErrorCode::from(err),
            ));
        }
        if pattern_matches_whole(pattern, name) {
            let mut partitions: Vec<i32> = topic.partitions().iter().map(|p| p.id()).collect();
            partitions.sort_unstable();
            selection.selected.push(SelectedTopic {
                name: name.to_string(),
                partitions,
            });
        } else {
            selection.skipped.push(name.to_string());
        }
    }
    selection.selected.sort_by(|a, b| a.name.cmp(&b.name));
    selection.skipped.sort();
    Ok(selection)
}

/// The pattern is applied as the user wrote it: `^orders$` matches one
/// topic, `^orders` every topic starting with it, `orders` any topic
/// containing it (that is what "a full regex; the user anchors it" means).
fn pattern_matches_whole(pattern: &Regex, name: &str) -> bool {
    pattern.is_match(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_applied_as_written() {
        let exact = Regex::new("^(customers|orders)$").unwrap();
        assert!(pattern_matches_whole(&exact, "orders"));
        assert!(!pattern_matches_whole(&exact, "orders_v2"));
        let prefix = Regex::new("^orders").unwrap();
        assert!(pattern_matches_whole(&prefix, "orders_v2"));
        let nothing = Regex::new("^nothing_here$").unwrap();
        assert!(!pattern_matches_whole(&nothing, "customers"));
    }
}
