//! The `topicberg` command line.
//!
//! The commands (`check`, `discover`, `sync`, `serve`) arrive with their
//! issues; today the binary only knows its name and version.

use clap::Parser;

/// Kafka topics into Apache Iceberg tables.
#[derive(Parser)]
#[command(name = "topicberg", version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    println!(
        "topicberg {}: the check, discover and sync commands are not built yet; see README.md",
        env!("CARGO_PKG_VERSION")
    );
    Ok(())
}
