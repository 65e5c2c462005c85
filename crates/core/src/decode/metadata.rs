//! The metadata columns of a row: the message's Kafka coordinates and
//! times, and `_olake_id` from the key (or the message's place).

use super::buffer::ColumnBuffer;
use super::{
    error, place_bytes, BatchDecoder, DecodeError, DecodeErrorKind, KeyPart, KEY_FIELD_PREFIX,
};
use crate::columns;
use crate::olake_id::{encode_key_value, hash_hex};
use crate::record::SourceRecord;

/// Where each metadata column sits (absent ones are not filled).
#[derive(Default)]
pub(super) struct MetadataColumns {
    pub(super) key: Option<usize>,
    pub(super) partition: Option<usize>,
    pub(super) offset: Option<usize>,
    pub(super) timestamp: Option<usize>,
    pub(super) id: Option<usize>,
    pub(super) op_type: Option<usize>,
    pub(super) olake_timestamp: Option<usize>,
    pub(super) cdc_timestamp: Option<usize>,
    pub(super) cdc_lsn: Option<usize>,
    pub(super) headers: Option<usize>,
    pub(super) cdc_op: Option<usize>,
}

impl MetadataColumns {
    /// Where the metadata column `name` is kept.
    pub(super) fn slot(&mut self, name: &str) -> &mut Option<usize> {
        match name {
            columns::KAFKA_KEY => &mut self.key,
            columns::KAFKA_PARTITION => &mut self.partition,
            columns::KAFKA_OFFSET => &mut self.offset,
            columns::KAFKA_TIMESTAMP => &mut self.timestamp,
            columns::OLAKE_ID => &mut self.id,
            columns::OP_TYPE => &mut self.op_type,
            columns::OLAKE_TIMESTAMP => &mut self.olake_timestamp,
            columns::CDC_LSN => &mut self.cdc_lsn,
            columns::KAFKA_HEADERS => &mut self.headers,
            columns::CDC_OP => &mut self.cdc_op,
            _ => &mut self.cdc_timestamp,
        }
    }
}

impl BatchDecoder {
    pub(super) fn append_metadata(
        &mut self,
        record: &SourceRecord<'_>,
        row: usize,
    ) -> Result<(), DecodeError> {
        let m = &self.metadata;
        let b = &mut self.buffers;
        let micros = record.timestamp_ms.and_then(|ms| ms.checked_mul(1000));
        let full = |column: usize| {
            error(
                record,
                Some(self.fields.names[column].to_string()),
                DecodeErrorKind::BatchFull,
            )
        };
        if let Some(c) = m.key {
            match record.key {
                Some(key) => b[c].push_base64(key).map_err(|_| full(c))?,
                None => b[c].push_null(),
            }
        }
        if let Some(c) = m.partition {
            b[c].push_i32(record.partition);
        }
        if let Some(c) = m.offset {
            b[c].push_i64(record.offset);
        }
        // A change event's `_cdc_timestamp` is the source's change time.
        let cdc_micros = self.change_micros.or(micros);
        for (c, micros) in [(m.timestamp, micros), (m.cdc_timestamp, cdc_micros)] {
            match (c, micros) {
                (Some(c), Some(micros)) => b[c].push_i64(micros),
                (Some(c), None) => b[c].push_null(),
                (None, _) => {}
            }
        }
        if let Some(c) = m.cdc_lsn {
            match self.change_lsn {
                Some(lsn) => b[c].push_i64(lsn),
                None => b[c].push_null(),
            }
        }
        match m.headers {
            Some(c) if self.kafka_headers => {
                append_headers(&mut b[c], record).map_err(|kind| {
                    let field = Some(columns::KAFKA_HEADERS.to_string());
                    error(record, field, kind)
                })?;
            }
            Some(c) => b[c].push_null(),
            None => {}
        }
        if let Some(c) = m.cdc_op {
            match self.change_op {
                Some(op) => b[c].push_str(op).map_err(|_| full(c))?,
                None => b[c].push_null(),
            }
        }
        if let Some(c) = m.op_type {
            b[c].push_str("c").map_err(|_| full(c))?;
        }
        if let Some(c) = m.olake_timestamp {
            b[c].push_i64(self.olake_timestamp_micros);
        }
        // Last: in upsert mode the id hashes other columns of this row.
        if let Some(c) = m.id {
            let id_bytes = match &mut self.key_columns {
                None => {
                    place_bytes(&mut self.place, record);
                    &self.place
                }
                Some(keys) => {
                    self.scratch.clear();
                    self.scratch.push(b'K');
                    for part in keys {
                        match part {
                            KeyPart::Column(k) => {
                                let value = b[*k].key_value(row);
                                if value == crate::KeyValue::Null {
                                    let field = Some(self.fields.names[*k].to_string());
                                    return Err(error(record, field, DecodeErrorKind::NullKey));
                                }
                                encode_key_value(&mut self.scratch, &value);
                            }
                            KeyPart::KeyField(f) => f
                                .encode(self.registry.as_deref(), record.key, &mut self.scratch)
                                .map_err(|kind| {
                                    let field = format!("{KEY_FIELD_PREFIX}{}", f.name());
                                    error(record, Some(field), kind)
                                })?,
                        }
                    }
                    &self.scratch
                }
            };
            b[c].push_utf8(&hash_hex(id_bytes)).map_err(|_| full(c))?;
        }
        Ok(())
    }
}

/// The record's headers as one `_kafka_headers` value: a list of
/// `{key, value}` structs in the message's order (empty for none).
fn append_headers(
    column: &mut ColumnBuffer,
    record: &SourceRecord<'_>,
) -> Result<(), DecodeErrorKind> {
    let full = |_| DecodeErrorKind::BatchFull;
    let element = column.list_element();
    record.headers.for_each(|h| {
        let key = std::str::from_utf8(h.key).map_err(|_| DecodeErrorKind::BadHeaders {
            reason: "a key is not UTF-8",
        })?;
        let fields = element.struct_fields();
        fields[0].push_str(key).map_err(full)?;
        match h.value {
            Some(value) => fields[1].push_bytes(value),
            None => fields[1].push_null(),
        }
        element.close_row().map_err(full)
    })?;
    column.close_row().map_err(full)
}
