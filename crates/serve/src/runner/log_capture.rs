//! Per-run log capture: a tracing layer that copies every event inside a
//! span carrying a `run_id` field (the runner's `run` span) into that run's
//! buffer, as lines like the CLI's log without colours:
//!
//! ```text
//! 2026-11-29T20:30:36.123456Z  INFO topicberg::sync: sync in progress records=5000 bytes=81234 rate=2500
//! ```
//!
//! Threads a run spawns log into its buffer when they enter the run's span
//! (the drain threads do: `sync/pipeline.rs`).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A run's log keeps at most this many bytes; later lines are counted and
/// dropped (the run's error is recorded separately).
pub const MAX_RUN_LOG_BYTES: usize = 8 << 20;

/// The buffers of the runs being captured; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct LogCapture {
    runs: Arc<Mutex<HashMap<i64, RunLog>>>,
}

#[derive(Default)]
struct RunLog {
    text: String,
    dropped_lines: u64,
}

impl LogCapture {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<i64, RunLog>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts keeping the events of `run_id` (events of runs not opened are
    /// not kept).
    pub fn open(&self, run_id: i64) {
        self.runs().entry(run_id).or_default();
    }

    /// The log of a run in progress so far; `None` when not captured.
    pub fn current(&self, run_id: i64) -> Option<String> {
        self.runs().get(&run_id).map(RunLog::render)
    }

    /// Stops capturing `run_id` and returns its log (empty if none).
    pub fn take(&self, run_id: i64) -> String {
        self.runs()
            .remove(&run_id)
            .map(|log| log.render())
            .unwrap_or_default()
    }

    pub(crate) fn append(&self, run_id: i64, line: &str) {
        let line = &topicberg_core::redact_urls(line);
        if let Some(log) = self.runs().get_mut(&run_id) {
            if log.text.len() + line.len() > MAX_RUN_LOG_BYTES {
                log.dropped_lines += 1;
            } else {
                log.text.push_str(line);
            }
        }
    }
}

impl RunLog {
    fn render(&self) -> String {
        if self.dropped_lines == 0 {
            return self.text.clone();
        }
        format!(
            "{}... {} more lines dropped (the log is capped at {} MiB)\n",
            self.text,
            self.dropped_lines,
            MAX_RUN_LOG_BYTES >> 20
        )
    }
}

/// A new capture layer and its buffers: install the layer in the tracing
/// subscriber and give the buffers to the runner
/// (`Runner::with_log_capture`). Keeps events at `INFO` and above.
pub fn log_capture_layer() -> (LogCaptureLayer, LogCapture) {
    let capture = LogCapture::default();
    (
        LogCaptureLayer {
            capture: capture.clone(),
            max_level: Level::INFO,
        },
        capture,
    )
}

/// The layer of [`log_capture_layer`].
pub struct LogCaptureLayer {
    capture: LogCapture,
    max_level: Level,
}

/// The `run_id` of a span, kept in its extensions.
struct RunId(i64);

#[derive(Default)]
struct RunIdVisitor(Option<i64>);

impl Visit for RunIdVisitor {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "run_id" {
            self.0 = Some(value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.record_i64(field, value as i64);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "run_id" {
            self.0 = format!("{value:?}").parse().ok();
        }
    }
}

impl<S> Layer<S> for LogCaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut visitor = RunIdVisitor::default();
        attrs.record(&mut visitor);
        if let (Some(run_id), Some(span)) = (visitor.0, ctx.span(id)) {
            span.extensions_mut().insert(RunId(run_id));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut visitor = RunIdVisitor::default();
        values.record(&mut visitor);
        if let (Some(run_id), Some(span)) = (visitor.0, ctx.span(id)) {
            span.extensions_mut().replace(RunId(run_id));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() > self.max_level {
            return;
        }
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some(run_id) = scope
            .into_iter()
            .find_map(|span| span.extensions().get::<RunId>().map(|r| r.0))
        else {
            return;
        };
        self.capture.append(run_id, &format_line(event));
    }
}

/// `<time>  INFO <target>: <message> <key>=<value> ...\n`, as the CLI's
/// `tracing_subscriber::fmt` prints it without colours.
pub(crate) fn format_line(event: &Event<'_>) -> String {
    let meta = event.metadata();
    let mut fields = FieldsVisitor::default();
    event.record(&mut fields);
    let mut line = format!(
        "{} {:>5} {}:",
        chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ"),
        meta.level().as_str(),
        meta.target()
    );
    if let Some(message) = &fields.message {
        line.push(' ');
        line.push_str(message);
    }
    for field in &fields.rest {
        line.push(' ');
        line.push_str(field);
    }
    // One event, one line.
    let mut line = line.replace('\n', "\n    ");
    line.push('\n');
    line
}

#[derive(Default)]
struct FieldsVisitor {
    message: Option<String>,
    rest: Vec<String>,
}

impl Visit for FieldsVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_string());
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if name.starts_with("log.") {
            return;
        }
        if name == "message" {
            self.message = Some(format!("{value:?}"));
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        let mut text = String::new();
        let _ = write!(text, "{name}={value:?}");
        self.rest.push(text);
    }
}
