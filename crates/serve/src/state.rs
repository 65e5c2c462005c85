//! What every request handler shares.

use std::sync::Arc;

use crate::guard::Guard;
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
    /// The Host allowlist, the metrics token, the login throttle and the
    /// setup token.
    pub guard: Arc<Guard>,
}
