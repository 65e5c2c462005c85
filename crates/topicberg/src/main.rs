//! The `topicberg` command line: `check`, `discover`, `sync`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use topicberg::check::run_check;
use topicberg::discover::discover;
use topicberg::sync::run_sync;
use topicberg_core::JobConfig;

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
    /// Run one bounded sync: drain every selected topic to its high watermark.
    Sync {
        /// The job file.
        #[arg(short, long)]
        config: PathBuf,
        /// Also write the per-table report as JSON to this file.
        #[arg(long)]
        report_json: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOPICBERG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Check { config } => {
            let config = JobConfig::load(&config)?;
            let steps = run_check(&config).await;
            let mut ok = true;
            for step in &steps {
                match &step.outcome {
                    Ok(text) => println!("ok    {:<13} {text}", step.step),
                    Err(text) => {
                        ok = false;
                        println!("FAIL  {:<13} {text}", step.step);
                    }
                }
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Discover { config, json } => {
            let config = JobConfig::load(&config)?;
            let topics = tokio::task::spawn_blocking(move || discover(&config)).await??;
            if json {
                println!("{}", serde_json::to_string_pretty(&topics)?);
            } else {
                for t in &topics {
                    println!(
                        "topic {} ({} partitions, {} messages sampled) -> table {}",
                        t.topic, t.partitions, t.sampled_messages, t.table
                    );
                    for (name, ty) in &t.columns {
                        println!("    {name:<30} {ty}");
                    }
                    println!("{}", t.streams_block);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sync {
            config,
            report_json,
        } => {
            let config = JobConfig::load(&config)?;
            let report = run_sync(&config).await?;
            print!("{}", report.to_text());
            if let Some(path) = report_json {
                std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(if report.succeeded() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
