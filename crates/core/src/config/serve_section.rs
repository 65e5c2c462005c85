//! `[serve]`: what `topicberg serve` keeps of a job besides the job file
//! (its schedules, its mode, the pattern its streams page offers topics
//! from). An export writes it and an import reads it back, so a job
//! crosses services whole; `topicberg sync` and `maintain` ignore it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the service runs a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobMode {
    /// Syncs on the job's schedule and by hand.
    #[default]
    Scheduled,
    /// A follower (`sync --follow`), started with the service.
    Continuous,
}

impl JobMode {
    /// The name stored and shown: `scheduled`, `continuous`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Continuous => "continuous",
        }
    }

    /// The mode named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Scheduled, Self::Continuous]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

/// `[serve]`: the job's settings in `topicberg serve` that are not part of
/// a sync (an export writes them, an import reads them back);
/// `topicberg sync` and `maintain` ignore them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::schema::field_order::<Self>)]
pub struct ServeSection {
    /// When the service syncs the job, in UTC (`every 5 minutes`,
    /// `daily at 03:00`, or a cron expression). Unset: by hand only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-label" = "Schedule (UTC)"))]
    pub schedule: Option<String>,
    /// When the service maintains the job's tables, in UTC. Unset: by
    /// hand only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-label" = "Maintenance schedule (UTC)"))]
    pub maintain_schedule: Option<String>,
    /// `scheduled` (syncs on the schedule and by hand) or `continuous`
    /// (the service follows the topics, as `sync --follow`).
    #[serde(default)]
    #[schemars(extend("x-label" = "Mode"))]
    pub mode: JobMode,
    /// The pattern of the topics the service's streams page offers to
    /// tick (the job's topics are its `[[streams]]`; in the job file the
    /// pattern would select topics itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-label" = "Topics offered"))]
    pub topic_pattern: Option<String>,
}

impl ServeSection {
    /// Whether nothing is set (an export then writes no `[serve]`).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}
