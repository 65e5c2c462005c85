//! The job a run or a request works on: its job file parsed (`${VAR}` from
//! the process environment), its relative paths put under the data folder
//! and resolved into a [`Job`] once ([`load_job`]), as the CLI does with
//! the file it is given. Runs and API requests pass that `Job` down.
//! Why a job did not load: [`JobFileError`], its file ([`JobConfigError`])
//! or its settings ([`JobProblems`]).

use std::path::Path;

use topicberg_core::config::ConfigProblem;
use topicberg_core::{ConfigError, Job, JobConfig};

use crate::error_kind::ServeErrorKind;
use crate::run_store::RunStoreError;

/// A job file, parsed and resolved.
#[derive(Debug, Clone)]
pub struct LoadedJob {
    /// The file as parsed (paths under the data folder): what a page shows
    /// of the file as written (each topic's stream entry, the engines).
    pub config: JobConfig,
    /// The job resolved from it: what runs and checks work on.
    pub job: Job,
}

/// Why a job could not be loaded: its file, or its settings.
#[derive(Debug, thiserror::Error)]
pub enum JobFileError {
    /// The store could not give the file, or it does not parse or validate.
    #[error(transparent)]
    Config(#[from] JobConfigError),
    /// It parses but its settings do not resolve.
    #[error(transparent)]
    Unresolved(#[from] JobProblems),
}

impl JobFileError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        match self {
            Self::Config(e) => e.kind(),
            Self::Unresolved(_) => ServeErrorKind::Invalid,
        }
    }
}

/// Why a job's configuration could not be read as a run reads it.
#[derive(Debug, thiserror::Error)]
pub enum JobConfigError {
    /// The store could not give the job's job file.
    #[error(transparent)]
    Store(#[from] RunStoreError),
    /// The job file did not load.
    #[error("the job's configuration is invalid: {0}")]
    Invalid(#[source] ConfigError),
}

impl JobConfigError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::Invalid(_) => ServeErrorKind::Invalid,
        }
    }
}

/// A job whose settings do not resolve: every problem, joined by `; `.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct JobProblems(pub Vec<ConfigProblem>);

/// Parses `toml`, puts its relative paths under `data_dir` (when given)
/// and resolves the job.
pub fn load_job(toml: &str, data_dir: Option<&Path>) -> Result<LoadedJob, JobFileError> {
    let mut config = JobConfig::from_toml_str(toml, |name| std::env::var(name).ok())
        .map_err(JobConfigError::Invalid)?;
    if let Some(dir) = data_dir {
        resolve_paths(&mut config, dir);
    }
    let job = Job::resolve(&config).map_err(JobProblems)?;
    Ok(LoadedJob { config, job })
}

/// Joins the job file's relative paths to the data folder.
fn resolve_paths(config: &mut JobConfig, dir: &Path) {
    if config.sync.state_dir.is_relative() {
        config.sync.state_dir = dir.join(&config.sync.state_dir);
    }
    if let Some(path) = config.destination.path.as_mut() {
        if path.is_relative() {
            *path = dir.join(&*path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = "name = \"p\"\n[source]\nbootstrap_servers = \"k:9092\"\n\
                        topic_pattern = \"^t$\"\n[destination]\ncatalog = \"sql\"\n";

    #[test]
    fn relative_paths_resolve_against_the_data_dir() {
        let loaded = load_job(TOML, Some(Path::new("/data"))).unwrap();
        assert_eq!(loaded.job.state_dir, Path::new("/data/.topicberg-state"));
        assert_eq!(
            loaded.job.destination.path.as_deref(),
            Some(Path::new("/data/warehouse"))
        );
        let toml = TOML.replace("catalog = \"sql\"", "catalog = \"sql\"\npath = \"/abs/wh\"");
        let loaded = load_job(&toml, Some(Path::new("/data"))).unwrap();
        assert_eq!(
            loaded.job.destination.path.as_deref(),
            Some(Path::new("/abs/wh"))
        );
    }

    #[test]
    fn a_file_that_does_not_parse_or_resolve_says_which() {
        let bad = TOML.replace("bootstrap_servers", "bootstrap_server");
        let e = load_job(&bad, None).unwrap_err();
        assert!(
            matches!(e, JobFileError::Config(JobConfigError::Invalid(_))),
            "{e}"
        );
        assert_eq!(e.kind(), ServeErrorKind::Invalid);
        assert!(
            e.to_string()
                .starts_with("the job's configuration is invalid: "),
            "{e}"
        );
    }
}
