//! A new registry table's columns: the payload fields of the writer
//! schemas that a sample of its messages were written with, in first-seen
//! order (a later schema's field widens an earlier one's column, as the
//! drain would), typed from the schema, not guessed from values. In `auto`
//! mode plain JSON values in the sample are inferred as JSON columns and
//! added after them.

use std::collections::HashSet;
use std::sync::Arc;

use topicberg_core::decode::fit::{fit, Fit};
use topicberg_core::registry::framing;
use topicberg_core::{
    ColumnNames, ColumnType, DecodeErrorKind, RegistryValues, SchemaInference, ValueFormat,
};
use topicberg_kafka::{drain, DrainSettings, KafkaConnection, PartitionRange};

use crate::sample::{MessageAt, SampleError, SampledMessage};

/// Payload fields and the column type each is stored as.
type Fields = Vec<(String, ColumnType)>;

/// What sampling found.
#[derive(Debug, Default)]
pub(super) struct SampledSchemas {
    /// Writer schema ids in first-seen order, with their fields (`None`:
    /// a JSON Schema, or one that cannot give columns and is skipped).
    ids: Vec<(u32, Option<Fields>)>,
    /// Plain JSON values (in `auto`), inferred.
    json: Option<SchemaInference>,
}

/// The payload columns of a new table whose values are registry-framed.
/// With `skip_invalid`, values that are not framed (avro, protobuf) or
/// whose schema cannot become columns are left out instead of failing.
pub(super) fn sample_columns(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    registry: &RegistryValues,
    skip_invalid: bool,
    keep: Option<Arc<HashSet<String>>>,
) -> Result<Vec<(String, ColumnType)>, SampleError> {
    let mut found = SampledSchemas::default();
    drain(connection, ranges, settings, |record| {
        let Some(value) = record.value else {
            return Ok(());
        };
        let at = || MessageAt::of(record);
        match framing(value) {
            Some(f) if !found.ids.iter().any(|(id, _)| *id == f.schema_id) => {
                let fields = match registry.fields_of(f.schema_id) {
                    Ok(fields) => fields,
                    Err(DecodeErrorKind::Registry(e)) => return Err(SampledMessage::Registry(e)),
                    Err(_) if skip_invalid => None,
                    Err(kind) => return Err(SampledMessage::Unreadable { at: at(), kind }),
                };
                found.ids.push((f.schema_id, fields));
            }
            Some(_) => {}
            None if registry.format == ValueFormat::Auto => {
                let json = found
                    .json
                    .get_or_insert_with(|| SchemaInference::new().keep_only(keep.clone()));
                if let Err(source) = json.add(value) {
                    if !skip_invalid {
                        return Err(SampledMessage::Invalid { at: at(), source });
                    }
                }
            }
            None if skip_invalid => {}
            None => {
                return Err(SampledMessage::NotFramed {
                    at: at(),
                    format: registry.format,
                })
            }
        }
        Ok(())
    })
    .map_err(SampleError::Read)?;
    merge(found, skip_invalid, keep.as_deref())
}

/// The fields of every sampled schema merged into one column list, named
/// as the decoder names them.
fn merge(
    found: SampledSchemas,
    skip_invalid: bool,
    keep: Option<&HashSet<String>>,
) -> Result<Vec<(String, ColumnType)>, SampleError> {
    let mut fields: Vec<(String, ColumnType)> = Vec::new();
    for (id, declared) in found.ids {
        let Some(declared) = declared else { continue };
        for (name, ty) in declared {
            if keep.is_some_and(|k| !k.contains(&name)) {
                continue;
            }
            match fields.iter_mut().find(|(n, _)| *n == name) {
                None => fields.push((name, ty)),
                Some((_, have)) => match fit(have, &ty) {
                    Fit::Holds => {}
                    Fit::Widen(to) => *have = to,
                    Fit::Incompatible(_) if skip_invalid => {}
                    Fit::Incompatible(reason) => {
                        return Err(SampleError::Incompatible {
                            schema_id: id,
                            field: name,
                            reason,
                        })
                    }
                },
            }
        }
    }
    if let Some(json) = found.json {
        for (name, ty) in json.columns() {
            if !fields.iter().any(|(n, _)| *n == name) {
                fields.push((name, ty));
            }
        }
    }
    named_columns(fields)
}

/// Payload fields with their column names, as the decoder names them.
pub(super) fn named_columns(
    fields: Vec<(String, ColumnType)>,
) -> Result<Vec<(String, ColumnType)>, SampleError> {
    let mut names = ColumnNames::new();
    fields
        .into_iter()
        .map(|(field, ty)| {
            let column = names
                .assign(&field)
                .map_err(|source| SampleError::ColumnName {
                    field: field.clone(),
                    source,
                })?;
            Ok((column, ty))
        })
        .collect()
}
