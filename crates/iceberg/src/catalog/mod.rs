//! The catalogs a destination can commit to: a REST catalog, or the embedded
//! SQLite catalog. Both take the same table operations and the same
//! `requirements + updates` commits.

pub mod rest;
pub mod sql;

use std::collections::HashMap;

use iceberg::spec::{Schema, SortOrder, UnboundPartitionSpec};
use iceberg::{TableRequirement, TableUpdate};

use crate::catalog::rest::{LoadedTable, Namespace, RestCatalog};
use crate::catalog::sql::SqlCatalog;
use crate::CatalogError;

/// A REST catalog or the embedded SQLite catalog.
#[derive(Debug)]
pub enum Catalog {
    /// An Iceberg REST catalog (Polaris, Unity, SeaweedFS, the reference server).
    Rest(std::sync::Arc<RestCatalog>),
    /// The embedded catalog: a SQLite file and a local warehouse folder.
    Sql(SqlCatalog),
}

macro_rules! delegate {
    ($self:ident, $method:ident($($arg:expr),*)) => {
        match $self {
            Catalog::Rest(c) => c.$method($($arg),*).await,
            Catalog::Sql(c) => c.$method($($arg),*).await,
        }
    };
}

impl Catalog {
    /// Lists namespaces (children of `parent` when given).
    pub async fn list_namespaces(
        &self,
        parent: Option<&Namespace>,
    ) -> Result<Vec<Namespace>, CatalogError> {
        delegate!(self, list_namespaces(parent))
    }

    /// Creates a namespace; an existing one is a conflict.
    pub async fn create_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        delegate!(self, create_namespace(namespace))
    }

    /// Creates a namespace unless it exists.
    pub async fn ensure_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        delegate!(self, ensure_namespace(namespace))
    }

    /// Drops an empty namespace.
    pub async fn drop_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        delegate!(self, drop_namespace(namespace))
    }

    /// The names of the tables in `namespace`, sorted.
    pub async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<String>, CatalogError> {
        delegate!(self, list_tables(namespace))
    }

    /// Loads a table.
    pub async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<LoadedTable, CatalogError> {
        delegate!(self, load_table(namespace, table))
    }

    /// Creates a table.
    pub async fn create_table(
        &self,
        namespace: &Namespace,
        table: &str,
        schema: &Schema,
        properties: &HashMap<String, String>,
    ) -> Result<LoadedTable, CatalogError> {
        delegate!(self, create_table(namespace, table, schema, properties))
    }

    /// Creates a table partitioned by `spec` and sorted by `sort_order`
    /// (source ids of `schema`).
    pub async fn create_partitioned_table(
        &self,
        namespace: &Namespace,
        table: &str,
        schema: &Schema,
        spec: &UnboundPartitionSpec,
        sort_order: &SortOrder,
        properties: &HashMap<String, String>,
    ) -> Result<LoadedTable, CatalogError> {
        delegate!(
            self,
            create_partitioned_table(namespace, table, schema, spec, sort_order, properties)
        )
    }

    /// Drops a table (`purge`: its files too).
    pub async fn drop_table(
        &self,
        namespace: &Namespace,
        table: &str,
        purge: bool,
    ) -> Result<(), CatalogError> {
        delegate!(self, drop_table(namespace, table, purge))
    }

    /// Commits `updates` if every requirement holds.
    pub async fn commit_table(
        &self,
        namespace: &Namespace,
        table: &str,
        requirements: &[TableRequirement],
        updates: &[TableUpdate],
    ) -> Result<LoadedTable, CatalogError> {
        delegate!(self, commit_table(namespace, table, requirements, updates))
    }
}
