//! Snapshots and the commits that land them: the append snapshot, the row
//! delta (data and delete files together), what both share (manifests,
//! manifest list, snapshot, requirements, reading and rewriting a manifest's
//! entries), their summary, the table's record
//! of Kafka offsets, the schema change that rides along with a commit, and
//! the gate that lets one commit per table through at a time in a process.

pub mod append;
pub(crate) mod gate;
pub(crate) mod manifest_entries;
pub(crate) mod manifest_merge;
pub mod offsets;
pub mod row_delta;
pub mod schema_evolution;
pub(crate) mod snapshot_commit;
pub(crate) mod summary;
