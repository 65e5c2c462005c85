//! What every request handler shares.

use crate::metrics::Metrics;
use crate::runner::Runner;
use crate::store::Store;

/// What every request handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// Starts, cancels and tracks runs.
    pub runner: Runner,
    /// The Prometheus metrics.
    pub metrics: Metrics,
    /// A job that has not succeeded for longer than this fraction of its
    /// topics' shortest retention gets a warning on its page.
    pub retention_warning_fraction: f64,
}
