//! An in-memory [`RunStore`] for the runner's and the scheduler's tests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use crate::run_store::{FinishedRun, RunKind, RunStore, RunStoreError, ScheduledJob, Trigger};

/// Run ids are unique across every store of the process (the tests share
/// one log capture, keyed by run id).
static NEXT_RUN_ID: AtomicI64 = AtomicI64::new(1);

/// One recorded run.
#[derive(Debug, Clone)]
pub(crate) struct RunRecord {
    pub(crate) run_id: i64,
    pub(crate) job_id: i64,
    pub(crate) trigger: Trigger,
    pub(crate) started_ms: i64,
    pub(crate) finished: Option<FinishedRun>,
}

#[derive(Default)]
struct Inner {
    jobs: BTreeMap<i64, (ScheduledJob, String)>,
    runs: Vec<RunRecord>,
}

/// Jobs and runs in memory.
#[derive(Default)]
pub(crate) struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }

    /// Adds a job; returns its id.
    pub(crate) fn add_job(&self, schedule: &str, last_started_ms: Option<i64>, toml: &str) -> i64 {
        let mut inner = self.inner();
        let id = inner.jobs.len() as i64 + 1;
        let job = ScheduledJob {
            job_id: id,
            job_name: format!("job{id}"),
            kind: RunKind::Sync,
            schedule: schedule.to_string(),
            paused: false,
            last_started_ms,
        };
        inner.jobs.insert(id, (job, toml.to_string()));
        id
    }

    /// The job's runs, oldest first.
    pub(crate) fn runs_of(&self, job_id: i64) -> Vec<RunRecord> {
        self.inner()
            .runs
            .iter()
            .filter(|r| r.job_id == job_id)
            .cloned()
            .collect()
    }

    /// One run.
    pub(crate) fn run(&self, run_id: i64) -> RunRecord {
        self.inner()
            .runs
            .iter()
            .find(|r| r.run_id == run_id)
            .cloned()
            .expect("run recorded")
    }
}

impl RunStore for MemoryStore {
    fn job_toml(&self, job_id: i64) -> Result<String, RunStoreError> {
        self.inner()
            .jobs
            .get(&job_id)
            .map(|(_, toml)| toml.clone())
            .ok_or(RunStoreError::NoJob(job_id))
    }

    fn insert_run(
        &self,
        job_id: i64,
        _kind: RunKind,
        trigger: Trigger,
        started_ms: i64,
    ) -> Result<i64, RunStoreError> {
        let mut inner = self.inner();
        let run_id = NEXT_RUN_ID.fetch_add(1, Ordering::Relaxed);
        inner.runs.push(RunRecord {
            run_id,
            job_id,
            trigger,
            started_ms,
            finished: None,
        });
        if let Some((job, _)) = inner.jobs.get_mut(&job_id) {
            job.last_started_ms = Some(started_ms);
        }
        Ok(run_id)
    }

    fn finish_run(&self, run: &FinishedRun) -> Result<(), RunStoreError> {
        let mut inner = self.inner();
        let record = inner
            .runs
            .iter_mut()
            .find(|r| r.run_id == run.run_id)
            .ok_or(RunStoreError::NoRun(run.run_id))?;
        record.finished = Some(run.clone());
        Ok(())
    }

    fn schedules(&self) -> Result<Vec<ScheduledJob>, RunStoreError> {
        Ok(self.inner().jobs.values().map(|(j, _)| j.clone()).collect())
    }
}

/// A local port that takes connections (the kernel's backlog) and never
/// answers: a broker that does not answer for the sync's whole deadline
/// (a closed port is refused at once).
fn silent_broker() -> u16 {
    static SILENT: std::sync::OnceLock<std::net::TcpListener> = std::sync::OnceLock::new();
    SILENT
        .get_or_init(|| std::net::TcpListener::bind("127.0.0.1:0").expect("a local port"))
        .local_addr()
        .expect("its address")
        .port()
}

/// A job file whose broker does not answer (a port that accepts and says
/// nothing) and whose catalog is an embedded one in a fresh temporary
/// folder.
pub(crate) fn unreachable_job_toml(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!(
        "topicberg-runner-{name}-{}",
        NEXT_RUN_ID.load(Ordering::Relaxed)
    ));
    format!(
        "name = \"{name}\"\n[source]\nbootstrap_servers = \"127.0.0.1:{}\"\ntopic_pattern = \"^t$\"\n\
         [destination]\ncatalog = \"sql\"\npath = \"{}\"\n",
        silent_broker(),
        dir.join("warehouse").display()
    )
}
