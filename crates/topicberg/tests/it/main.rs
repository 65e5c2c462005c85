//! Integration tests against the test bed (`scripts/testbed up`): a real
//! Kafka broker, SeaweedFS (S3 + Iceberg REST catalog), Apache Iceberg's
//! reference REST catalog, and independent readers.
//!
//! Every test names its topics and namespaces at random, so runs never
//! collide, and reads the addresses from `scripts/testbed env`.

mod catalog_faults;
mod catalog_smoke;
mod cdc_append;
mod cdc_avro;
mod cdc_debezium;
mod cdc_flattened;
mod cdc_order;
mod cdc_payload_keys;
mod cdc_rounds;
mod cdc_soft_deletes;
mod cdc_testbed;
mod cdc_toast;
mod cdc_truncate;
mod cloud_storage;
mod error_messages;
mod fault_injection;
mod fault_proxy;
mod iceberg_append;
mod iceberg_commit_faults;
mod iceberg_deletes;
mod image;
mod kafka_faults;
mod kafka_smoke;
mod kafka_tls;
mod maintain;
mod maintain_random;
mod maintenance_by_other_engines;
mod reader_recipes;
mod readers_smoke;
mod secrets_errors;
mod serve_a11y;
mod serve_api;
mod serve_browser;
mod serve_browser_forms;
mod serve_browser_ui;
mod serve_follow;
mod serve_import;
mod serve_login_http;
mod serve_runner;
mod serve_schedule;
mod serve_security;
mod serve_support;
mod sql_catalog;
mod storage_credentials;
mod storage_faults;
mod support;
mod sync_append;
mod sync_cloud_warehouse;
mod sync_concurrent;
mod sync_evolution;
mod sync_fetch;
mod sync_follow;
mod sync_headers;
mod sync_invalid;
mod sync_missing_topics;
mod sync_names;
mod sync_order_by;
mod sync_partitioned;
mod sync_pruning;
mod sync_registry;
mod sync_route;
mod sync_shared_table;
mod sync_sorted;
mod sync_split;
mod sync_table_names;
mod sync_upsert;
mod sync_upsert_conflict;
mod testbed;
mod workers;
mod workers_tables;
mod workers_upsert;
