//! A routed topic's parts that the stages share (see `route.rs`): its
//! route in a sync, each routed table's place in it, and why a route could
//! not be planned.

use std::sync::Arc;

use topicberg_core::route::RouteTemplate;
use topicberg_core::ColumnType;

use super::plan::PartitionPlan;
use crate::sample::SampleError;

/// The table property that records the text a routed table's name was
/// made from, per topic (`topicberg.route.<topic>`): another text that
/// makes the same name collides.
pub(crate) const ROUTE_PROPERTY_PREFIX: &str = "topicberg.route.";

/// One topic's route in a sync.
#[derive(Debug)]
pub(crate) struct RouteGroup {
    /// The topic.
    pub(crate) topic: String,
    /// The template.
    pub(crate) template: RouteTemplate,
    /// Change events: the template reads their envelope.
    pub(crate) envelope: bool,
    /// The route's read, from the group's offsets.
    pub(crate) plans: Vec<PartitionPlan>,
    /// Every table the round's messages name (those that hold all of them
    /// already too: the drain passes their messages).
    pub(crate) tables: std::collections::BTreeSet<String>,
}

/// A table of a route, as planned.
#[derive(Debug)]
pub(crate) struct RoutedTable {
    /// Its route.
    pub(crate) group: Arc<RouteGroup>,
    /// The text its name was made from.
    pub(crate) text: String,
    /// The columns of its sampled messages, for creating it.
    pub(crate) columns: Option<Vec<(String, ColumnType)>>,
}

impl RoutedTable {
    /// The table property recording the text its name was made from.
    pub(crate) fn property(&self) -> (String, String) {
        let key = format!("{ROUTE_PROPERTY_PREFIX}{}", self.group.topic);
        (key, self.text.clone())
    }
}

/// Why a route could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum RouteFailure {
    /// Routing in a continuous sync (a follower, alone or among workers).
    #[error(
        "topic {topic}: routing to tables by a template is done by scheduled syncs only so far \
         (topicberg sync, serve's scheduled jobs), not in continuous mode (sync --follow, \
         continuous jobs) nor among workers"
    )]
    AmongWorkers {
        /// The topic.
        topic: String,
    },
    /// A registry-framed topic.
    #[error(
        "topic {topic}: table {template:?} routes messages to tables, which is done for JSON \
         values only so far; set a table name"
    )]
    NotJson {
        /// The topic.
        topic: String,
        /// The template.
        template: String,
    },
    /// Two texts make one table name.
    #[error(
        "topic {topic}: {first:?} and {second:?} both name table {table} (table names are \
         lower-case letters, digits and _); route them apart with another template"
    )]
    Collision {
        /// The topic.
        topic: String,
        /// The table.
        table: String,
        /// The text seen first (or recorded by the table).
        first: String,
        /// The other text.
        second: String,
    },
    /// A routed table is another stream's table too.
    #[error(
        "table {table} is written by topic {first} and named by the messages of topic {second}; \
         one table takes one topic's messages: route them apart with another template"
    )]
    Shared {
        /// The table.
        table: String,
        /// The other topic.
        first: String,
        /// The routed topic naming it too.
        second: String,
    },
    /// The task reading the route's messages stopped (a panic).
    #[error("topic {topic}: finding the tables its messages name stopped: {reason}")]
    Stopped {
        /// The topic.
        topic: String,
        /// Why.
        reason: String,
    },
    /// Reading the route's messages failed.
    #[error("topic {topic}: finding the tables its messages name: {source}")]
    Read {
        /// The topic.
        topic: String,
        /// Why.
        #[source]
        source: Box<SampleError>,
    },
}

impl RouteFailure {
    /// What kind of failure.
    pub fn kind(&self) -> crate::error::SyncErrorKind {
        use crate::error::SyncErrorKind;
        match self {
            Self::AmongWorkers { .. }
            | Self::NotJson { .. }
            | Self::Collision { .. }
            | Self::Shared { .. } => SyncErrorKind::Config,
            Self::Read { source, .. } => source.kind(),
            Self::Stopped { .. } => SyncErrorKind::Internal,
        }
    }

    /// Whether trying again may help.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Read { source, .. } if source.retryable())
    }
}
