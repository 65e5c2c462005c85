//! The store as the runner's [`RunStore`]: a run's job file, its start and
//! end, the jobs the scheduler follows; and runs a stopped process left
//! `running`.

use rusqlite::params;

use super::{Store, StoreError};
use crate::pieces::Secrets;
use crate::run_store::{
    FinishedRun, JobMode, RunKind, RunStatus, RunStore, RunStoreError, ScheduledJob, Trigger,
};

impl RunStore for Store {
    fn job_toml(&self, job_id: i64) -> Result<String, RunStoreError> {
        let store_error = |e: StoreError| RunStoreError::Store(Box::new(e));
        let job = self.job(job_id).map_err(store_error)?;
        let data_dir = self.data_dir.clone();
        self.assemble(
            &job,
            Secrets::Real {
                data_dir: &data_dir,
            },
        )
        .map_err(store_error)
    }

    fn insert_run(
        &self,
        job_id: i64,
        kind: RunKind,
        trigger: Trigger,
        started_ms: i64,
    ) -> Result<i64, RunStoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO runs (job_id, trigger, started_ms, status, kind) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                job_id,
                trigger.as_str(),
                started_ms,
                RunStatus::Running.as_str(),
                kind.as_str()
            ],
        )
        .map_err(|source| RunStoreError::InsertRun { job_id, source })?;
        Ok(conn.last_insert_rowid())
    }

    fn finish_run(&self, run: &FinishedRun) -> Result<(), RunStoreError> {
        self.conn()
            .execute(
                "UPDATE runs SET status = ?1, finished_ms = ?2, error = ?3, report_json = ?4,
                     log = ?5, lag = ?7 WHERE id = ?6",
                params![
                    run.status.as_str(),
                    run.finished_ms,
                    run.error,
                    run.report_json,
                    run.log,
                    run.run_id,
                    run.lag
                ],
            )
            .map_err(|source| RunStoreError::FinishRun {
                run_id: run.run_id,
                source,
            })?;
        Ok(())
    }

    fn schedules(&self) -> Result<Vec<ScheduledJob>, RunStoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT j.id, j.name, j.schedule, j.paused,
                        (SELECT MAX(started_ms) FROM runs r WHERE r.job_id = j.id AND r.kind = 'sync'),
                        j.maintain_schedule,
                        (SELECT MAX(started_ms) FROM runs r WHERE r.job_id = j.id AND r.kind = 'maintain'),
                        j.mode
                 FROM jobs j ORDER BY j.id",
            )
            .map_err(RunStoreError::Schedules)?;
        let rows = stmt
            .query_map([], |r| {
                let sync = ScheduledJob {
                    job_id: r.get(0)?,
                    job_name: r.get(1)?,
                    kind: RunKind::Sync,
                    schedule: r.get(2)?,
                    paused: r.get(3)?,
                    last_started_ms: r.get(4)?,
                };
                let maintain = ScheduledJob {
                    kind: RunKind::Maintain,
                    schedule: r.get(5)?,
                    last_started_ms: r.get(6)?,
                    ..sync.clone()
                };
                let continuous = r.get::<_, String>(7)? == JobMode::Continuous.as_str();
                Ok(([sync, maintain], continuous))
            })
            .map_err(RunStoreError::Schedules)?;
        let mut jobs = Vec::new();
        for pair in rows {
            // A job without a maintenance schedule has no maintenance timer.
            // A continuous job's follower runs instead of scheduled syncs.
            let (pair, continuous) = pair.map_err(RunStoreError::Schedules)?;
            jobs.extend(pair.into_iter().filter(|j| match j.kind {
                RunKind::Sync => !continuous,
                _ => !j.schedule.is_empty(),
            }));
        }
        Ok(jobs)
    }
}

impl Store {
    /// Marks runs left `running` by a previous process (it stopped before
    /// they ended) as failed; called at start.
    pub fn fail_interrupted_runs(&self, now_ms: i64) -> Result<usize, StoreError> {
        Ok(self.conn().execute(
            "UPDATE runs SET status = 'failed', finished_ms = ?1,
                 error = 'the service stopped while this run was in progress'
             WHERE status = 'running'",
            [now_ms],
        )?)
    }
}
