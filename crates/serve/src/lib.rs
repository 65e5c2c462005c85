//! `topicberg serve`: the HTTP server (JSON API, web UI, `/metrics`,
//! `/healthz`), the scheduler and the runs, with state in SQLite. Design:
//! docs/src/explanation/serve-design.md.
//!
//! # Layout
//!
//! Each module uses only modules above it in this list:
//!
//! | module | owns |
//! |---|---|
//! | [`error_kind`] | what kind of failure an error of the service is (`ServeErrorKind`) |
//! | [`job_file`] | a job file loaded for a run or a request: parsed, paths under the data folder, resolved once into a `Job`; why it did not load (`JobFileError`, `JobConfigError`, `JobProblems`) |
//! | [`pieces`] | job-file pieces (`[source]`, `[destination]`, ...), write-only secrets; <-> job TOML and export placeholders (`pieces/job_toml.rs`) |
//! | [`run_store`] | what runs and the scheduler need from the store (`RunStore`, `RunStoreError`), run status and trigger |
//! | [`store`] | the SQLite database: migrations, sources, destinations, jobs, runs and their logs, sessions, the admin user |
//! | [`metrics`] | the Prometheus metrics (`/metrics` text), consumer lag |
//! | [`runner`] | runs: one at a time per job, cancel, shutdown; the per-run log capture (`runner/log_capture.rs`); why a run did not start or ended without a report (`runner/error.rs`) |
//! | [`scheduler`] | schedules (cron, presets, UTC), next run, missed run at start, the scheduler loop; why a schedule's text is none (`scheduler/error.rs`) |
//! | [`warnings`] | the retention warning of a job's page |
//! | [`error`] | `ApiError`: the status and `{"error", "problems"}` body of every failed request |
//! | [`guard`] | security headers, the Host allowlist, the `/metrics` token, same-origin JSON for setup and login, the login throttle, tokens compared in constant time |
//! | `state` | [`AppState`]: what every request handler shares |
//! | [`auth`] | the admin password, sessions, CSRF, the session middleware |
//! | [`api`] | the JSON API routes (`api/jobs.rs`: jobs, runs, import, export; `api/overview.rs`: a job's last success and lag); its answers, one struct per shape (`api/answers.rs`) |
//! | [`ui`] | the web UI: one embedded page, script and stylesheet; `GET /api/session` |
//! | `server` | [`serve`]: start-up, [`router`], graceful shutdown |

pub mod api;
pub mod auth;
pub mod body;
pub mod error;
pub mod error_kind;
pub mod forwarded;
pub mod guard;
pub mod job_file;
pub mod metrics;
pub mod pieces;
pub mod run_store;
pub mod runner;
pub mod scheduler;
mod server;
mod state;
pub mod store;
pub mod ui;
pub mod warnings;
pub mod worker;

pub use server::{router, serve, ServeArgs, ServeError, DEFAULT_LISTEN};
pub use state::AppState;
