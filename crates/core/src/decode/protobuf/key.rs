//! A `_kafka_key.<field>` dedup key read from a Protobuf message key: the
//! key's message indexes name its message, whose top-level `field` is read
//! into a one-value buffer (absent proto3 scalars read their default, as
//! in values; a field with presence that is absent is a null key).

use std::sync::Arc;

use super::plan::{compile_top, MessageOp};
use super::read::{message_indexes, read_message, Scratch};
use crate::decode::buffer::ColumnBuffer;
use crate::decode::error::DecodeErrorKind;
use crate::decode::framed::Parsed;
use crate::decode::schema_error::SchemaError;
use crate::olake_id::{encode_key_value, KeyValue};

/// How one key message's field is read, or why it cannot be.
type KeyPlan = Result<(MessageOp, ColumnBuffer), SchemaError>;

/// The key field of one Protobuf key schema, per message it names.
pub(crate) struct ProtoKey {
    /// The key schema (a [`Parsed::Protobuf`]).
    schema: Arc<Parsed>,
    /// Per message-index path: how to read the field.
    messages: Vec<(Vec<i32>, KeyPlan)>,
    scratch: Scratch,
}

impl ProtoKey {
    /// Keys written with `schema` (a Protobuf one).
    pub(crate) fn new(schema: Arc<Parsed>) -> Self {
        Self {
            schema,
            messages: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Appends field `name` of the key `body` (after the schema id `id`)
    /// to `out` as a key value is encoded.
    pub(crate) fn encode(
        &mut self,
        id: u32,
        name: &str,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeErrorKind> {
        let bad = |reason: String| DecodeErrorKind::BadBody {
            schema_id: id,
            reason: format!("in the message key: {reason}"),
        };
        let start =
            message_indexes(body, &mut self.scratch.path).map_err(|b| bad(b.to_string()))?;
        let at = self.plan_at(name).map_err(|e| bad(e.to_string()))?;
        let (op, buffer) = match &mut self.messages[at].1 {
            Ok(plan) => plan,
            Err(reason) => {
                return Err(DecodeErrorKind::UnsupportedSchema {
                    schema_id: id,
                    reason: Box::new(reason.clone()),
                })
            }
        };
        let read = read_message(
            op,
            &body[start..],
            &mut self.scratch,
            std::slice::from_mut(buffer),
        );
        let result = match read {
            Err(fault) => Err(bad(match fault.field {
                Some(field) => format!("field {field}: {}", fault.bad),
                None => fault.bad.to_string(),
            })),
            Ok(()) => match buffer.key_value(0) {
                KeyValue::Null => Err(DecodeErrorKind::NullKey),
                value => {
                    encode_key_value(out, &value);
                    Ok(())
                }
            },
        };
        buffer.truncate(0);
        result
    }

    /// Where the plan for the message at `self.scratch.path` sits, made on
    /// first use; `Err` when the path names no message (not kept).
    fn plan_at(&mut self, name: &str) -> Result<usize, SchemaError> {
        let path = &self.scratch.path;
        if let Some(at) = self.messages.iter().position(|(p, _)| p == path) {
            return Ok(at);
        }
        let Parsed::Protobuf(schema) = self.schema.as_ref() else {
            unreachable!("a ProtoKey reads Protobuf keys")
        };
        let message = schema
            .message(path)
            .ok_or_else(|| SchemaError::NoMessageAt { path: path.clone() })?;
        let plan = message.and_then(|m| key_plan(&m, name));
        self.messages.push((path.clone(), plan));
        Ok(self.messages.len() - 1)
    }
}

/// How to read top-level field `name` of `message` into a one-value buffer.
fn key_plan(message: &super::ProtoMessage, name: &str) -> KeyPlan {
    let field = message
        .fields
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| SchemaError::NoKeyMessageField {
            message: message.name.clone(),
            name: name.to_owned(),
        })?;
    let column = field
        .column_type()
        .filter(|c| !c.is_nested())
        .ok_or_else(|| SchemaError::KeyNotSingle {
            name: name.to_owned(),
            column: None,
        })?;
    let targets: Vec<Option<usize>> = message
        .fields
        .iter()
        .map(|f| (f.name == name).then_some(0))
        .collect();
    let op = compile_top(message, &targets, &[&column], Vec::new()).map_err(|(_, e)| e)?;
    Ok((op, ColumnBuffer::new(column)))
}
