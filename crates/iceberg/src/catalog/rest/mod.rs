//! An Iceberg REST catalog client of our own (REST catalog OpenAPI spec).

mod client;
mod oauth;
mod retry;
mod tables;

pub use client::{CatalogAuth, Namespace, RestCatalog, RestCatalogConfig};
pub use oauth::{exchange_client_credentials, AccessToken};
pub use retry::{ATTEMPTS as REQUEST_ATTEMPTS, WINDOW as RETRY_WINDOW};
pub use tables::LoadedTable;

#[cfg(test)]
mod tests;
