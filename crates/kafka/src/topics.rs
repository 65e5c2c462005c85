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
    /// Topics the pattern spells out (`^(a|b)$`) that the cluster does not
    /// have, sorted by name.
    pub missing: Vec<String>,
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
    // A topic the pattern names outright but the listing left out may be
    // one the ACLs hide: ask for it by name, so that a refusal is named.
    for name in literal_topics(pattern.as_str()) {
        let listed = metadata.topics().iter().any(|t| t.name() == name);
        if !listed {
            refused_topic(connection, &name, timeout)?;
            selection.missing.push(name);
        }
    }
    selection.selected.sort_by(|a, b| a.name.cmp(&b.name));
    selection.skipped.sort();
    selection.missing.sort();
    selection.missing.dedup();
    Ok(selection)
}

/// An error when the cluster refuses to describe `name` to these
/// credentials (`TOPIC_AUTHORIZATION_FAILED`); nothing when it is simply
/// missing.
fn refused_topic(
    connection: &KafkaConnection,
    name: &str,
    timeout: Duration,
) -> Result<(), KafkaError> {
    let context = format!("describing topic {name}");
    let metadata = crate::ping::fetch_metadata_of(connection, Some(name), timeout, &context)?;
    let refused = metadata.topics().iter().any(|t| {
        t.name() == name
            && t.error().map(rdkafka::types::RDKafkaErrorCode::from)
                == Some(rdkafka::types::RDKafkaErrorCode::TopicAuthorizationFailed)
    });
    if refused {
        return Err(KafkaError::new(
            KafkaErrorKind::Authorization,
            context,
            format!(
                "not authorized: the cluster's ACLs do not let {} describe topic {name} \
                 (TOPIC_AUTHORIZATION_FAILED); ask the cluster's admin to allow DESCRIBE and \
                 READ on topic {name} for this principal, or leave the topic out of \
                 topic_pattern",
                principal(connection)
            ),
        ));
    }
    Ok(())
}

/// The principal the connection logs in as, in words.
pub(crate) fn principal(connection: &KafkaConnection) -> String {
    if let Some(sasl) = &connection.sasl {
        return format!("user \"{}\"", sasl.username);
    }
    if let Some(oauth) = &connection.oauth {
        return format!("OAuth client \"{}\"", oauth.client_id);
    }
    if connection.client_certificate.is_some() {
        return "the client certificate's principal".to_string();
    }
    "this client".to_string()
}

/// The topic names a pattern spells out in full: `^orders$`,
/// `^(customers|orders)$` (dots escaped as `\.`); none for any other
/// pattern.
fn literal_topics(pattern: &str) -> Vec<String> {
    let Some(inner) = pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$')) else {
        return Vec::new();
    };
    let inner = inner
        .strip_prefix('(')
        .and_then(|p| p.strip_suffix(')'))
        .unwrap_or(inner);
    let mut names = Vec::new();
    for alternative in inner.split('|') {
        let name = alternative.replace("\\.", ".").replace("\\-", "-");
        let literal = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !literal {
            return Vec::new();
        }
        names.push(name);
    }
    names
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

    #[test]
    fn literal_topics_are_only_the_names_a_pattern_spells_out() {
        assert_eq!(literal_topics("^orders$"), ["orders"]);
        assert_eq!(
            literal_topics("^(customers|orders\\.v2)$"),
            ["customers", "orders.v2"]
        );
        assert!(literal_topics("^orders").is_empty());
        assert!(literal_topics("^(orders|pay.*)$").is_empty());
        assert!(literal_topics("orders").is_empty());
    }
}
