//! What changes from run to run in a message, masked: the test bed's
//! addresses, the temporary folder, generated names, UUIDs, durations and
//! counters.

use crate::testbed::get;

/// `text` with what changes from run to run replaced by a `<placeholder>`:
/// the test bed's addresses (`TESTBED_*` values), the temporary folder,
/// 32-digit hex names ([`unique_name`]), UUIDs, durations, librdkafka's
/// counters and request ids. `extra` replaces more literal values first.
pub(super) fn mask(text: &str, extra: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (value, placeholder) in extra {
        out = out.replace(value, placeholder);
    }
    let tmp = std::env::temp_dir();
    let tmp = tmp.to_string_lossy();
    out = out.replace(tmp.trim_end_matches('/'), "<tmp>");
    for (name, placeholder) in [
        ("TESTBED_KAFKA_SASL_SSL_BOOTSTRAP", "<kafka-sasl-ssl>"),
        ("TESTBED_KAFKA_SASL_BOOTSTRAP", "<kafka-sasl>"),
        ("TESTBED_KAFKA_TLS_BOOTSTRAP", "<kafka-tls>"),
        ("TESTBED_KAFKA_BOOTSTRAP", "<kafka>"),
        ("TESTBED_SCHEMA_REGISTRY_URL", "<registry>"),
        ("TESTBED_SEAWEED_URI", "<seaweed>"),
        ("TESTBED_S3_ENDPOINT", "<s3>"),
        ("TESTBED_KAFKA_TLS_OTHER_CA", "<other-ca>"),
    ] {
        out = out.replace(&get(name), placeholder);
    }
    out = mask_uuids(&out);
    out = mask_hex32(&out);
    for (before, after) in [
        ("duration=", "s"),
        ("FAILED in ", "s"),
        ("succeeded in ", "s"),
        ("after ", "ms in state"),
        (" in ", " s)"),
        (" in ", "ms - "),
        ("(", " identical error(s) suppressed"),
        (", ", " identical error(s) suppressed"),
        ("answered: ", " subject(s)"),
    ] {
        out = mask_number(&out, before, after);
    }
    mask_between(&out, "<RequestId>", "</RequestId>")
}

/// Every `<before><number><after>` with the number (digits and dots) as `<n>`.
fn mask_number(text: &str, before: &str, after: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(before) {
        let start = at + before.len();
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let digits = tail
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(tail.len());
        if digits > 0 && tail[digits..].starts_with(after) {
            out.push_str("<n>");
            rest = &tail[digits..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Every `<open>...</close>` with its content as `<n>`.
fn mask_between(text: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        let start = at + open.len();
        out.push_str(&rest[..start]);
        match rest[start..].find(close) {
            Some(end) => {
                out.push_str("<n>");
                rest = &rest[start + end..];
            }
            None => rest = &rest[start..],
        }
    }
    out.push_str(rest);
    out
}

/// Runs of exactly `len` characters of which `keep` holds, between
/// characters that are not hex digits, replaced by `placeholder`.
fn mask_runs(
    text: &str,
    len: usize,
    keep: impl Fn(usize, char) -> bool,
    placeholder: &str,
) -> String {
    let chars: Vec<char> = text.chars().collect();
    let hexish = |c: char| c.is_ascii_hexdigit();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let bounded_before = i == 0 || !hexish(chars[i - 1]);
        if bounded_before
            && i + len <= chars.len()
            && (0..len).all(|k| keep(k, chars[i + k]))
            && chars.get(i + len).is_none_or(|c| !hexish(*c))
        {
            out.push_str(placeholder);
            i += len;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn mask_hex32(text: &str) -> String {
    mask_runs(
        text,
        32,
        |_, c| c.is_ascii_digit() || ('a'..='f').contains(&c),
        "<hex>",
    )
}

fn mask_uuids(text: &str) -> String {
    mask_runs(
        text,
        36,
        |k, c| {
            if [8, 13, 18, 23].contains(&k) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        },
        "<uuid>",
    )
}
