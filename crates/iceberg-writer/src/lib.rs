//! topicberg's Iceberg side.
//!
//! - [`rest`]: our own Iceberg REST catalog client (the `iceberg` crate's
//!   client cannot commit delete files or refresh OAuth2 tokens; see
//!   REFERENCE.md), starting with authentication, `GET /v1/config` and
//!   namespace listing.
//!
//! Data files, delete files, manifests and the snapshot commit build on it.

mod error;
pub mod rest;

pub use error::{CatalogError, CatalogErrorKind};
