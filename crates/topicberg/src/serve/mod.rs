//! `topicberg serve`: the HTTP server (JSON API, web UI, `/metrics`,
//! `/healthz`), the scheduler and the runs, with state in SQLite. Design:
//! docs/serve.md.

pub mod api;
pub mod auth;
pub mod metrics;
pub mod pieces;
pub mod run_store;
pub mod runner;
pub mod scheduler;
pub mod store;
