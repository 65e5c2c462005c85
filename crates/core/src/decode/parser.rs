//! The JSON parser under the decoder's serde visitors: the one seam.
//!
//! Every decoder rule lives in the visitors ([`super::seed`]); a parser
//! only has to drive them over one message and hand over a nested value's
//! JSON text as the message has it (serde_json's `RawValue`, sonic-rs's
//! `LazyValue`). Errors are rare and diagnosed with serde_json either way,
//! so their wording does not depend on the parser.

use serde::de::{Deserializer, Visitor};
use serde::Deserialize;

/// A serde JSON parser the decoder can run on.
pub(super) trait JsonParser {
    /// Drives `visitor` over `text` as one value (through
    /// `deserialize_map`), then requires nothing but whitespace after it.
    /// The error's text is only shown when serde_json accepts the value.
    fn parse_object<'de, V: Visitor<'de, Value = ()>>(
        text: &'de str,
        visitor: V,
    ) -> Result<(), String>;

    /// Reads one value from `d` and calls `f` with its JSON text, exactly
    /// as the message has it (escapes and all).
    fn with_raw<'de, D: Deserializer<'de>, T>(
        d: D,
        f: impl FnOnce(&str) -> Result<T, D::Error>,
    ) -> Result<T, D::Error>;
}

/// serde_json, with `raw_value` and `float_roundtrip`.
#[cfg_attr(feature = "sonic", allow(dead_code))]
pub(super) struct SerdeJson;

impl JsonParser for SerdeJson {
    #[inline]
    fn parse_object<'de, V: Visitor<'de, Value = ()>>(
        text: &'de str,
        visitor: V,
    ) -> Result<(), String> {
        let mut de = serde_json::Deserializer::from_str(text);
        de.deserialize_map(visitor)
            .and_then(|()| de.end())
            .map_err(|e| e.to_string())
    }

    #[inline]
    fn with_raw<'de, D: Deserializer<'de>, T>(
        d: D,
        f: impl FnOnce(&str) -> Result<T, D::Error>,
    ) -> Result<T, D::Error> {
        let raw = <&'de serde_json::value::RawValue>::deserialize(d)?;
        f(raw.get())
    }
}

/// sonic-rs (SIMD string scanning and skipping), the experiment.
#[cfg(feature = "sonic")]
pub(super) struct Sonic;

#[cfg(feature = "sonic")]
impl JsonParser for Sonic {
    #[inline]
    fn parse_object<'de, V: Visitor<'de, Value = ()>>(
        text: &'de str,
        visitor: V,
    ) -> Result<(), String> {
        let mut de = sonic_rs::Deserializer::from_str(text);
        de.deserialize_map(visitor)
            .and_then(|()| de.end())
            .map_err(|e| e.to_string())
    }

    #[inline]
    fn with_raw<'de, D: Deserializer<'de>, T>(
        d: D,
        f: impl FnOnce(&str) -> Result<T, D::Error>,
    ) -> Result<T, D::Error> {
        let raw = sonic_rs::LazyValue::<'de>::deserialize(d)?;
        f(raw.as_raw_str())
    }
}

/// The parser the decoder runs on.
#[cfg(not(feature = "sonic"))]
pub(super) type Parser = SerdeJson;
/// The parser the decoder runs on.
#[cfg(feature = "sonic")]
pub(super) type Parser = Sonic;
