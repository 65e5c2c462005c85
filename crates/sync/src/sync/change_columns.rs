//! A new change-event table's columns (`change_events`): the fields of the
//! sampled events' `after`, typed from their Connect schema when the
//! messages carry it (first-seen order; a later schema's new field comes
//! after, a changed type is left to the drain, which widens or fails as
//! for a registry schema), inferred from the values when they do not.
//! Deletes, truncates and tombstones have no row and add nothing.

use std::collections::HashSet;
use std::sync::Arc;

use topicberg_core::{
    change_columns_in, ChangeColumns, ColumnType, RegistryValues, SchemaInference, SourceRecord,
};
use topicberg_kafka::{drain, DrainSettings, KafkaConnection, PartitionRange};

use crate::sample::{MessageAt, SampleError, SampledMessage};

/// The payload columns of a new table of change events sampled from
/// `ranges` (registry-framed ones read through `registry`); with
/// `skip_invalid`, a message that is not an event is left out instead of
/// failing the sample.
pub(crate) fn sample_change_columns(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    registry: Option<Arc<RegistryValues>>,
    skip_invalid: bool,
    keep: Option<Arc<HashSet<String>>>,
    max_columns: usize,
) -> Result<Vec<(String, ColumnType)>, SampleError> {
    let mut sample = ChangeSample::new(keep, max_columns).with_registry(registry);
    drain(connection, ranges, settings, |record| {
        match sample.add(record) {
            Err(_) if skip_invalid => Ok(()),
            other => other,
        }
    })
    .map_err(SampleError::Read)?;
    sample.columns()
}

/// The columns change events give, as they are added.
pub(crate) struct ChangeSample {
    typed: Vec<(String, ColumnType)>,
    untyped: SchemaInference,
    keep: Option<Arc<HashSet<String>>>,
    registry: Option<Arc<RegistryValues>>,
}

impl ChangeSample {
    /// An empty sample keeping only `keep`'s fields (all: `None`).
    pub(crate) fn new(keep: Option<Arc<HashSet<String>>>, max_columns: usize) -> Self {
        ChangeSample {
            typed: Vec::new(),
            untyped: SchemaInference::new()
                .keep_only(keep.clone())
                .max_columns(max_columns),
            keep,
            registry: None,
        }
    }

    /// The sample reading registry-framed events through `registry`.
    pub(crate) fn with_registry(mut self, registry: Option<Arc<RegistryValues>>) -> Self {
        self.registry = registry;
        self
    }

    /// Adds `record`'s event (a tombstone, a delete or a truncate adds
    /// nothing); a message that is not an event is the error.
    pub(crate) fn add(&mut self, record: &SourceRecord<'_>) -> Result<(), SampledMessage> {
        let Some(value) = record.value else {
            return Ok(());
        };
        let at = || MessageAt::of(record);
        match change_columns_in(value, self.registry.as_deref()) {
            Ok(None) => {}
            Ok(Some(ChangeColumns::Typed(fields))) => {
                for (name, ty) in fields {
                    let kept = self.keep.as_ref().is_none_or(|k| k.contains(&name));
                    if kept && !self.typed.iter().any(|(n, _)| *n == name) {
                        self.typed.push((name, ty));
                    }
                }
            }
            Ok(Some(ChangeColumns::Untyped(after))) => {
                if let Err(source) = self.untyped.add(after) {
                    return Err(SampledMessage::Invalid { at: at(), source });
                }
            }
            Err(kind) => return Err(SampledMessage::Unreadable { at: at(), kind }),
        }
        Ok(())
    }

    /// The columns: the typed fields in first-seen order, then the
    /// inferred ones.
    pub(crate) fn columns(self) -> Result<Vec<(String, ColumnType)>, SampleError> {
        let mut typed = self.typed;
        for (name, ty) in self.untyped.columns() {
            if !typed.iter().any(|(n, _)| *n == name) {
                typed.push((name, ty));
            }
        }
        super::schema_columns::named_columns(typed)
    }
}
