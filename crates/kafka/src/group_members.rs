//! Who reads a consumer group's partitions now: its members (client id,
//! host) and the partitions each one is assigned, as the group coordinator
//! says. librdkafka's `DescribeConsumerGroups` asks with
//! `ConsumerGroupDescribe` for a KIP-848 group (the classic
//! `DescribeGroups` answers `GROUP_ID_NOT_FOUND` for those) and with
//! `DescribeGroups` for a classic one; rust-rdkafka does not wrap it, so
//! this calls it through the C API, on the calling (blocking) thread.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rdsys;
use rdkafka::client::DefaultClientContext;
use serde::Serialize;

use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// A consumer group as its coordinator describes it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GroupMembers {
    /// `Stable`, `PreparingRebalance`, `CompletingRebalance`, `Empty`,
    /// `Dead` (also a group that does not exist), or `Unknown` (librdkafka
    /// names only the classic states: a KIP-848 group assigning or
    /// reconciling is `Unknown`).
    pub state: String,
    /// `Consumer` (KIP-848) or `Classic`.
    pub protocol: String,
    /// Its members, by member id.
    pub members: Vec<GroupMemberView>,
}

/// One member of a group and what it reads.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GroupMemberView {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// The client id it connected with.
    pub client_id: String,
    /// The host it connected from, as the broker saw it.
    pub host: String,
    /// `(topic, partition)` it is assigned, sorted.
    pub partitions: Vec<(String, i32)>,
}

/// Describes `group` (members and their assignments); an unknown group is
/// `Dead` with no members.
pub fn describe_group(
    connection: &KafkaConnection,
    group: &str,
    timeout: Duration,
) -> Result<GroupMembers, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = connection
        .client_config()
        .create()
        .map_err(|e| KafkaError::new(KafkaErrorKind::Config, "creating an admin client", e))?;
    let name = CString::new(group).map_err(|e| {
        KafkaError::new(
            KafkaErrorKind::Config,
            "a consumer group name with a NUL",
            e,
        )
    })?;
    let rk = admin.inner().native_ptr();
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `rk` is the live client `admin` owns until the end of this
    // function; the queue, options and event made here are destroyed here;
    // every pointer read from the event lives as long as the event.
    unsafe {
        let queue = rdsys::rd_kafka_queue_new(rk);
        let options = rdsys::rd_kafka_AdminOptions_new(
            rk,
            rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
        );
        let mut errstr = [0 as c_char; 256];
        rdsys::rd_kafka_AdminOptions_set_request_timeout(
            options,
            millis,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        let mut names = [name.as_ptr()];
        rdsys::rd_kafka_DescribeConsumerGroups(rk, names.as_mut_ptr(), 1, options, queue);
        // A classic group on a KIP-848 broker takes two requests
        // (ConsumerGroupDescribe, then DescribeGroups), each with the timeout.
        let event =
            rdsys::rd_kafka_queue_poll(queue, millis.saturating_mul(2).saturating_add(1_000));
        let described = read_event(event, group);
        if !event.is_null() {
            rdsys::rd_kafka_event_destroy(event);
        }
        rdsys::rd_kafka_AdminOptions_destroy(options);
        rdsys::rd_kafka_queue_destroy(queue);
        described
    }
}

/// The group's description from the admin result `event`.
///
/// # Safety
/// `event` is null or a live `DescribeConsumerGroups` result event.
unsafe fn read_event(
    event: *mut rdsys::rd_kafka_event_t,
    group: &str,
) -> Result<GroupMembers, KafkaError> {
    let failed = |what: String| {
        KafkaError::new(
            KafkaErrorKind::Broker,
            format!("describing consumer group {group}"),
            what,
        )
    };
    if event.is_null() {
        return Err(failed("no answer in time".to_owned()));
    }
    if rdsys::rd_kafka_event_error(event) != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
    {
        return Err(failed(text(rdsys::rd_kafka_event_error_string(event))));
    }
    let result = rdsys::rd_kafka_event_DescribeConsumerGroups_result(event);
    if result.is_null() {
        return Err(failed("the answer is not a group description".to_owned()));
    }
    let mut count = 0usize;
    let groups = rdsys::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut count);
    if groups.is_null() || count == 0 {
        return Err(failed("the answer holds no group".to_owned()));
    }
    let description = *groups;
    let error = rdsys::rd_kafka_ConsumerGroupDescription_error(description);
    if !error.is_null() {
        return Err(failed(text(rdsys::rd_kafka_error_string(error))));
    }
    let state = text(rdsys::rd_kafka_consumer_group_state_name(
        rdsys::rd_kafka_ConsumerGroupDescription_state(description),
    ));
    let protocol = text(rdsys::rd_kafka_consumer_group_type_name(
        rdsys::rd_kafka_ConsumerGroupDescription_type(description),
    ));
    let members = (0..rdsys::rd_kafka_ConsumerGroupDescription_member_count(description))
        .map(|i| {
            member(rdsys::rd_kafka_ConsumerGroupDescription_member(
                description,
                i,
            ))
        })
        .collect::<Vec<_>>();
    let mut members = members;
    members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    Ok(GroupMembers {
        state,
        protocol,
        members,
    })
}

/// One member's description.
///
/// # Safety
/// `member` is a live member description of a live event.
unsafe fn member(member: *const rdsys::rd_kafka_MemberDescription_t) -> GroupMemberView {
    let mut partitions = Vec::new();
    let assignment = rdsys::rd_kafka_MemberDescription_assignment(member);
    if !assignment.is_null() {
        let list = rdsys::rd_kafka_MemberAssignment_partitions(assignment);
        if !list.is_null() && !(*list).elems.is_null() {
            let count = usize::try_from((*list).cnt).unwrap_or(0);
            for p in std::slice::from_raw_parts((*list).elems, count) {
                partitions.push((text(p.topic), p.partition));
            }
        }
    }
    partitions.sort();
    GroupMemberView {
        member_id: text(rdsys::rd_kafka_MemberDescription_consumer_id(member)),
        client_id: text(rdsys::rd_kafka_MemberDescription_client_id(member)),
        host: text(rdsys::rd_kafka_MemberDescription_host(member)),
        partitions,
    }
}

/// A C string as text ("" for null).
///
/// # Safety
/// `s` is null or a NUL-terminated string that outlives the call.
unsafe fn text(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    CStr::from_ptr(s).to_string_lossy().into_owned()
}
