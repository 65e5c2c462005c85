//! Snapshots and the commits that land them: the append snapshot, the row
//! delta (data and delete files together), what both share (manifests,
//! manifest list, snapshot, requirements, reading and rewriting a manifest's
//! entries), their summary, the table's record
//! of Kafka offsets, and the schema change that rides along with a commit.

pub mod append;
pub(crate) mod manifest_entries;
pub mod offsets;
pub mod row_delta;
pub mod schema_evolution;
pub(crate) mod snapshot_commit;
pub(crate) mod summary;
