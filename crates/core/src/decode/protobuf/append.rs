//! A Protobuf value into a [`BatchDecoder`] row: the message indexes, the
//! plan of the message they name (made on first use), the wire read.

use super::read::{message_indexes, read_message, Bad};
use crate::decode::framed::{plan_message, MessagePlan, Parsed, Plan};
use crate::decode::{error, plan_failure, BatchDecoder, DecodeError, DecodeErrorKind};
use crate::record::SourceRecord;

impl BatchDecoder {
    /// A Protobuf value (message indexes, then the message) with writer
    /// schema `id` into a new row.
    pub(in crate::decode) fn append_protobuf(
        &mut self,
        record: &SourceRecord<'_>,
        id: u32,
        body: &[u8],
    ) -> Result<(), DecodeError> {
        let bad_body = |bad: Bad| match bad {
            Bad::Full => DecodeErrorKind::BatchFull,
            bad => DecodeErrorKind::BadBody {
                schema_id: id,
                reason: bad.to_string(),
            },
        };
        let start = message_indexes(body, &mut self.wire.path)
            .map_err(|bad| error(record, None, bad_body(bad)))?;
        let at = self.message_plan(record, id)?;
        let Some(Plan::Protobuf(messages)) = self.plans.get(&id) else {
            unreachable!("schema {id} has a Protobuf plan")
        };
        let op = match &messages[at].1 {
            MessagePlan::Read(op) => op,
            MessagePlan::Fails(kind) => return Err(plan_failure(record, kind)),
        };
        let row = self.rows;
        let unknown_mark = self.unknown.len();
        let read = read_message(op, &body[start..], &mut self.wire, &mut self.buffers);
        if let Err(fault) = read {
            self.rollback(row, unknown_mark);
            return Err(error(record, fault.field, bad_body(fault.bad)));
        }
        if let Some(registry) = &self.registry {
            registry.used(id);
        }
        self.finish_row(record, row, unknown_mark)
    }

    /// Where the plan of the Protobuf message the current message indexes
    /// (`self.wire.path`) name sits among schema `id`'s message plans,
    /// made on first use.
    fn message_plan(&mut self, record: &SourceRecord<'_>, id: u32) -> Result<usize, DecodeError> {
        let Some(Plan::Protobuf(messages)) = self.plans.get(&id) else {
            unreachable!("schema {id} has a Protobuf plan")
        };
        // Compared by hand: `==` on slices calls memcmp, which showed in
        // the profile for one- or two-index paths.
        let path = &self.wire.path;
        let same = |p: &[i32]| p.len() == path.len() && p.iter().zip(path).all(|(a, b)| a == b);
        if let Some(at) = messages.iter().position(|(p, _)| same(p)) {
            return Ok(at);
        }
        let plan = self.compile_message(record, id)?;
        // Paths naming no message are not kept: a corrupt value could
        // name any number of them.
        if let MessagePlan::Fails(kind @ DecodeErrorKind::BadBody { .. }) = plan {
            return Err(error(record, None, kind));
        }
        let Some(Plan::Protobuf(messages)) = self.plans.get_mut(&id) else {
            unreachable!("schema {id} has a Protobuf plan")
        };
        messages.push((self.wire.path.clone(), plan));
        Ok(messages.len() - 1)
    }

    /// The plan for the Protobuf message at `self.wire.path` of schema
    /// `id` against these columns.
    fn compile_message(
        &self,
        record: &SourceRecord<'_>,
        id: u32,
    ) -> Result<MessagePlan, DecodeError> {
        let registry = self
            .registry
            .as_ref()
            .expect("framed values have a registry");
        let parsed = registry
            .parsed(id)
            .map_err(|kind| error(record, None, kind))?;
        let Parsed::Protobuf(schema) = &*parsed else {
            unreachable!("schema {id} has a Protobuf plan")
        };
        let lookup = |name: &str| self.fields.by_name.get(name).copied();
        let columns = self.columns(&lookup);
        Ok(plan_message(
            id,
            schema,
            &self.wire.path,
            &columns,
            registry.last_used(),
            (record.partition, record.offset),
        ))
    }
}
