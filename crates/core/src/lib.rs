//! The model shared by every part of topicberg.
//!
//! Today this holds [`Secret`], the type every password, client secret and
//! token travels in so that none of them can reach a log line, an error
//! message or a report by accident. Configuration, the record model and
//! decoding land here as they get a second user.

mod secret;

pub use secret::Secret;
