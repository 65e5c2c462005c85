//! The `topicberg` command line: `check`, `discover`, `sync`, `maintain`,
//! `serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use topicberg_core::{Job, JobConfig};
use topicberg_serve::runner::LogCapture;
use topicberg_sync::check::run_check;
use topicberg_sync::discover::discover;
use topicberg_sync::sync::run_sync;

/// mimalloc rather than the system allocator: a follower runs for weeks.
/// With glibc its RSS climbed in steps with each compaction pass and kept
/// them (98 to 154 MB in 15 minutes); with mimalloc it moves with the pass
/// in progress and falls back (71-137 MB over 30 minutes; bench/README.md,
/// "Thirty minutes at 5,000 msg/s again").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long mimalloc keeps freed memory before it gives it back to the
/// system. Its default, 1 s, is shorter than a follower's round: the
/// memory one round freed went back, and the next round's buffers came as
/// fresh pages the kernel zeroes on first touch, 37% of a follower's CPU
/// at 100,000 msg/s (1.38 against 1.02 µs per message; bench/README.md,
/// "the allocator's purge delay"). mimalloc purges everything freed by the
/// time the first delay expires, memory freed a moment before included, so
/// with 10 s every fifth round still started on fresh pages (1.02 µs per
/// message; 60 s: 0.86, never: 0.85). With 60 s the rounds reuse their
/// memory and a process that goes quiet, or a maintenance pass's peak,
/// gives it back within about a minute. `MIMALLOC_PURGE_DELAY` in the
/// environment wins.
const PURGE_DELAY_MS: std::os::raw::c_long = 60_000;

/// `mi_option_purge_delay`'s number in the bundled mimalloc's (v3)
/// `mi_option_t`, which the Rust binding does not name (a test checks it
/// is the option whose default is 1,000 ms).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn keep_freed_memory_between_rounds() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets one of mimalloc's tuning options, which it reads at
    // each purge; any value is valid.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
}

/// Kafka topics into Apache Iceberg tables.
#[derive(Parser)]
#[command(name = "topicberg", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Try every step a sync needs (brokers, credentials, catalog, bucket).
    Check {
        /// The job file.
        #[arg(short, long)]
        config: PathBuf,
    },
    /// List the topics the job selects and the columns their messages imply.
    Discover {
        /// The job file.
        #[arg(short, long)]
        config: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run one bounded sync: drain every selected topic to its high
    /// watermark. With --follow, keep following them.
    Sync {
        /// The job file.
        #[arg(short, long)]
        config: PathBuf,
        /// Also write the report as JSON to this file (with --follow: the
        /// follower's totals, when it stops).
        #[arg(long)]
        report_json: Option<PathBuf>,
        /// Follow the topics until SIGTERM or SIGINT: commit every table
        /// every `sync.commit_interval`, then on a stop commit what was
        /// read and exit (within `sync.stop_timeout`).
        #[arg(long)]
        follow: bool,
        /// With --follow: serve `/healthz` (liveness), `/readyz` (200
        /// while rounds succeed, 503 once the last success is older than 10
        /// commit intervals, at least a minute) and `/metrics` on this
        /// address, for an orchestrator (e.g. `0.0.0.0:9464` in a pod).
        #[arg(long, value_name = "ADDR", requires = "follow")]
        listen: Option<SocketAddr>,
        /// Keep the job's local state (its lock, upsert key indexes, the
        /// spill) in DIR instead of the job file's `[sync] state_dir` (a
        /// writable volume when the job file is mounted read-only).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Maintain the job's tables: compact small files and files with
    /// deletes, expire old snapshots, remove orphan files (`[maintain]`).
    Maintain {
        /// The job file.
        #[arg(short, long)]
        config: PathBuf,
        /// Only this table (`<table>` or `<namespace>.<table>`).
        #[arg(long)]
        table: Option<String>,
        /// Also write the per-table report as JSON to this file.
        #[arg(long)]
        report_json: Option<PathBuf>,
        /// Decide and report what would be done; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Run the service: JSON API, scheduler and syncs, state in DIR/topicberg.db.
    Serve {
        /// The folder holding the service's database and local state.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Address to listen on (loopback by default).
        #[arg(long, value_name = "ADDR", default_value = topicberg_serve::DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Warn on a job's page when it has not succeeded for longer than
        /// this fraction of its topics' shortest retention.
        #[arg(long, value_name = "FRACTION", default_value_t = topicberg_serve::warnings::DEFAULT_RETENTION_WARNING_FRACTION)]
        retention_warning_fraction: f64,
        /// A host name the service may be reached by (the `Host` header),
        /// besides 127.0.0.1, localhost, ::1 and the --listen address;
        /// repeat for several. Others get 421 (DNS rebinding).
        #[arg(long = "allowed-host", value_name = "NAME")]
        allowed_hosts: Vec<String>,
        /// A reverse proxy (an address or a network, e.g. 10.0.0.0/8)
        /// whose X-Forwarded-Proto and X-Forwarded-For are believed; repeat
        /// for several. From any other peer they are ignored.
        #[arg(long = "trusted-proxy", value_name = "CIDR", value_parser = topicberg_serve::forwarded::parse_trusted_proxy)]
        trusted_proxies: Vec<topicberg_serve::forwarded::IpNet>,
        /// Let login set its session cookie without `Secure` over plain
        /// HTTP on a host name other than localhost (a trusted network
        /// only: the cookie then travels unencrypted). Without it such a
        /// login is refused, saying why.
        #[arg(long)]
        allow_plain_http: bool,
    },
}

fn main() -> ExitCode {
    // glibc gives each thread that allocates its own arena; decoded batches
    // are allocated on the drain threads and freed on the writer's, which
    // left freed memory stranded in many arenas (peak RSS of a 10M append
    // 487-567 MiB; with 2 arenas 440-478 MiB, bench/README.md). Set before
    // any thread starts.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; no thread runs yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    keep_freed_memory_between_rounds();
    let cli = Cli::parse();
    // Only `serve` keeps each run's log; the other commands do not pay for it.
    let log_capture = init_logging(matches!(cli.command, Command::Serve { .. }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = match runtime.block_on(run(cli, log_capture)) {
        Ok(code) => code,
        Err(e) => {
            // The message alone: every library error's message already
            // names its cause (redacted); printing the source chain too
            // would say each cause again, and a wrapped HTTP error's own
            // words may show a URL's password.
            eprintln!("error: {e}");
            2
        }
    };
    // Every task and blocking task ends here; Kafka clients may still be
    // closing on threads of their own.
    drop(runtime);
    exit_after_closing_clients(code)
}

/// The process's exit. While a Kafka client is still closing on a thread
/// of its own, libc's exit handlers (OpenSSL's cleanup among them) must not
/// run under its TLS connections: the output is flushed and the process
/// ends without them. The client's work is done by then (offsets are
/// committed synchronously); the operating system closes its connections.
fn exit_after_closing_clients(code: u8) -> ExitCode {
    if !topicberg_kafka::clients_closing() {
        return ExitCode::from(code);
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process at once; the output is flushed above
    // and every file the command wrote was closed before `run` returned.
    unsafe { libc::_exit(i32::from(code)) }
}

/// Loads and validates the job file, then resolves it: every problem at
/// once, each with its fix.
fn load_job(path: &std::path::Path) -> anyhow::Result<Job> {
    load_job_with(path, None)
}

/// [`load_job`] with the job's `[sync] state_dir` replaced by `state_dir`
/// when given (`sync --state-dir`).
fn load_job_with(path: &std::path::Path, state_dir: Option<PathBuf>) -> anyhow::Result<Job> {
    let mut config = JobConfig::load(path)?;
    if let Some(dir) = state_dir {
        config.sync.state_dir = dir;
    }
    Job::resolve(&config).map_err(|problems| {
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("{}: {}", path.display(), problems.join("; "))
    })
}

/// Logs to stderr (URLs redacted) at `TOPICBERG_LOG`'s filter (default
/// `info`). With `capture_runs` also installs the per-run log layer (each
/// run's `INFO` and above, apart from stderr's filter) and returns its
/// buffers.
fn init_logging(capture_runs: bool) -> Option<LogCapture> {
    use tracing::level_filters::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOPICBERG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (capture_layer, log_capture) = if capture_runs {
        let (layer, capture) = topicberg_serve::runner::log_capture_layer();
        (Some(layer), Some(capture))
    } else {
        (None, None)
    };
    // rdkafka logs (through the `log` crate) at trace level for every
    // message it frees: cap `log` at the most verbose level anything here
    // shows (stderr's filter, the per-run capture's INFO), so those calls
    // stop at one atomic load instead of reaching tracing.
    let mut shown =
        tracing_subscriber::Layer::<tracing_subscriber::Registry>::max_level_hint(&filter)
            .unwrap_or(LevelFilter::TRACE);
    if capture_runs {
        shown = shown.max(LevelFilter::INFO);
    }
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| topicberg_sync::log_writer::RedactedStderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(filter),
        )
        .with(capture_layer)
        .init();
    log::set_max_level(log_level(shown));
    log_capture
}

/// The `log` crate's level for tracing's `level`.
fn log_level(level: tracing::level_filters::LevelFilter) -> log::LevelFilter {
    match level.into_level() {
        None => log::LevelFilter::Off,
        Some(tracing::Level::ERROR) => log::LevelFilter::Error,
        Some(tracing::Level::WARN) => log::LevelFilter::Warn,
        Some(tracing::Level::INFO) => log::LevelFilter::Info,
        Some(tracing::Level::DEBUG) => log::LevelFilter::Debug,
        Some(tracing::Level::TRACE) => log::LevelFilter::Trace,
    }
}

/// Runs the command; `log_capture` is the per-run log's buffers (`serve` only).
/// The process's exit code: 0 success, 1 a failed check / table / maintenance,
/// 2 an error (`main`), 75 the job already running (`EX_TEMPFAIL`).
async fn run(cli: Cli, log_capture: Option<LogCapture>) -> anyhow::Result<u8> {
    match cli.command {
        Command::Check { config } => check(&config).await,
        Command::Discover { config, json } => discover_topics(&config, json).await,
        Command::Serve {
            data_dir,
            listen,
            retention_warning_fraction,
            allowed_hosts,
            trusted_proxies,
            allow_plain_http,
        } => {
            topicberg_serve::serve(topicberg_serve::ServeArgs {
                data_dir,
                listen,
                // Installed by `init_logging` for `serve`.
                log_capture: log_capture.unwrap_or_default(),
                retention_warning_fraction,
                allowed_hosts,
                metrics_token: std::env::var(topicberg_serve::guard::METRICS_TOKEN_ENV).ok(),
                trusted_proxies,
                allow_plain_http,
            })
            .await?;
            Ok(0)
        }
        Command::Maintain {
            config,
            table,
            report_json,
            dry_run,
        } => {
            let job = load_job(&config)?;
            let options = topicberg_sync::maintain::MaintainOptions {
                table,
                dry_run,
                tiered: false,
                rewrite_budget: None,
                leading: None,
            };
            let report = topicberg_sync::maintain::run_maintain(&job, &options).await?;
            print!("{}", report.to_text());
            write_report(report_json, || serde_json::to_vec_pretty(&report))?;
            Ok(if report.succeeded() { 0 } else { 1 })
        }
        Command::Sync {
            config,
            report_json,
            follow,
            listen,
            state_dir,
        } => {
            let job = load_job_with(&config, state_dir)?;
            if follow {
                follow_job(job, report_json, listen).await
            } else {
                sync(job, report_json).await
            }
        }
    }
}

/// `check`: every step, `ok`, `FAIL` or `WARN` with its text.
async fn check(config: &std::path::Path) -> anyhow::Result<u8> {
    let job = load_job(config)?;
    let steps = run_check(&job).await;
    let mut ok = true;
    for step in &steps {
        match &step.outcome {
            Ok(text) => println!("ok    {:<13} {text}", step.step),
            Err(e) => {
                ok = false;
                println!("FAIL  {:<13} {e}", step.step);
            }
        }
        for warning in &step.warnings {
            println!("WARN  {:<13} {warning}", step.step);
        }
    }
    Ok(if ok { 0 } else { 1 })
}

/// `discover`: each selected topic and its columns, as text or JSON.
async fn discover_topics(config: &std::path::Path, json: bool) -> anyhow::Result<u8> {
    let job = load_job(config)?;
    let topics = tokio::task::spawn_blocking(move || discover(&job, true)).await??;
    if json {
        println!("{}", serde_json::to_string_pretty(&topics)?);
        return Ok(0);
    }
    for t in &topics {
        println!(
            "topic {} ({} partitions, {} messages sampled) -> table {}",
            t.topic, t.partitions, t.sampled_messages, t.table
        );
        println!(
            "    value format: {} ({})",
            t.value_format, t.value_format_reason
        );
        if let Some(example) = &t.invalid_example {
            println!(
                "    {} messages of the sample cannot become rows (left out); the first: {example}",
                t.invalid_messages
            );
        }
        for (name, ty) in &t.columns {
            println!("    {name:<30} {ty}");
        }
        for (field, column) in &t.renamed {
            println!(
                "    note: field {field:?} is stored in column {column:?}: {}",
                topicberg_core::names::rename_reason(field)
            );
        }
        println!("{}", t.streams_block);
    }
    Ok(0)
}

/// `sync`: the report as text (and JSON); 75 when another sync of the job
/// holds its lock here.
async fn sync(job: Job, report_json: Option<PathBuf>) -> anyhow::Result<u8> {
    let report = match run_sync(&job).await {
        Ok(report) => report,
        Err(e @ topicberg_sync::destination::SetupError::AlreadyRunning { .. }) => {
            eprintln!("topicberg sync: {e}");
            // EX_TEMPFAIL: nothing went wrong; try again later.
            return Ok(75);
        }
        Err(e) => return Err(e.into()),
    };
    print!("{}", report.to_text());
    write_report(report_json, || serde_json::to_vec_pretty(&report))?;
    Ok(if report.succeeded() { 0 } else { 1 })
}

/// `sync --follow`: rounds until SIGTERM or SIGINT; 0 when the last round
/// committed, 1 when it failed or was cut by the stop timeout.
async fn follow_job(
    job: Job,
    report_json: Option<PathBuf>,
    listen: Option<SocketAddr>,
) -> anyhow::Result<u8> {
    use std::sync::Arc;
    use topicberg_sync::follow::{run_follow_with, FollowLive, FollowOptions, StopSignal};
    let stop = Arc::new(StopSignal::default());
    let signals = tokio::spawn(stop_on_signal(Arc::clone(&stop)));
    let mut options = FollowOptions::default();
    let endpoints = match listen {
        Some(listen) => {
            let listener = topicberg_serve::worker::bind_worker_endpoints(listen).await?;
            let (live, metrics) = (Arc::new(FollowLive::default()), Default::default());
            options.live = Some(Arc::clone(&live));
            options.on_round = Some(topicberg_serve::runner::round_hook(&metrics, &job));
            let token = std::env::var(topicberg_serve::guard::METRICS_TOKEN_ENV).ok();
            let serving = topicberg_serve::worker::serve_worker_endpoints(
                listener,
                live,
                metrics,
                token,
                Arc::clone(&stop),
            );
            Some(tokio::spawn(serving))
        }
        None => None,
    };
    let report = run_follow_with(&job, stop, options).await;
    signals.abort();
    if let Some(endpoints) = endpoints {
        if let Err(e) = endpoints.await? {
            tracing::warn!(error = %e, "the worker endpoints failed");
        }
    }
    let report = report?;
    println!(
        "followed {}: {} rounds, {} snapshots, {} records",
        report.job, report.rounds, report.snapshots, report.records
    );
    if let Some(error) = &report.last_error {
        println!("the last round failed: {error}");
    }
    write_report(report_json, || serde_json::to_vec_pretty(&report))?;
    Ok(if report.succeeded() { 0 } else { 1 })
}

/// Asks the follower to stop on the first SIGTERM or SIGINT.
async fn stop_on_signal(stop: std::sync::Arc<topicberg_sync::follow::StopSignal>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for SIGTERM / SIGINT; stop the follower with SIGKILL");
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    tracing::info!(signal = name, "stopping: committing what was read");
    stop.request();
}

/// Writes the report's JSON (`json`) to `path`, when given.
fn write_report(
    path: Option<PathBuf>,
    json: impl FnOnce() -> serde_json::Result<Vec<u8>>,
) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(&path, json()?)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards the option number against a mimalloc update that renumbers
    /// `mi_option_t`: option 15 must be the purge delay (default 1,000 ms;
    /// its neighbours default to 1 and 0).
    #[test]
    fn the_allocator_option_set_between_rounds_is_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            panic!("unset MIMALLOC_PURGE_DELAY to run this test");
        }
        // SAFETY: reads one of mimalloc's options.
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(default, 1_000);
    }
}
