//! Both REST catalogs of the test bed take OAuth2 client credentials and
//! answer catalog requests through our client.

use std::time::Duration;

use topicberg_iceberg::rest::{CatalogAuth, RestCatalog, RestCatalogConfig};
use topicberg_iceberg::CatalogErrorKind;

use crate::testbed::{get, unique_name};

/// The test bed's catalogs: SeaweedFS's and Apache Iceberg's reference server.
const CATALOGS: [&str; 2] = ["SEAWEED", "FIXTURE"];

fn config(catalog: &str, secret_override: Option<&str>) -> RestCatalogConfig {
    let credential = get(&format!("TESTBED_{catalog}_CREDENTIAL"));
    let (client_id, client_secret) = credential.split_once(':').expect("credential is id:secret");
    RestCatalogConfig {
        uri: get(&format!("TESTBED_{catalog}_URI")),
        warehouse: Some(get(&format!("TESTBED_{catalog}_WAREHOUSE"))),
        auth: CatalogAuth::ClientCredentials {
            client_id: client_id.to_string(),
            client_secret: secret_override.unwrap_or(client_secret).into(),
            token_uri: Some(get(&format!("TESTBED_{catalog}_OAUTH2_URI"))),
            scope: None,
        },
        request_timeout: Duration::from_secs(20),
        vended_credentials: false,
        ca_pem: None,
    }
}

async fn connect(catalog: &str) -> RestCatalog {
    let config = config(catalog, None);
    RestCatalog::connect(&config).await.unwrap_or_else(|e| {
        panic!(
            "{catalog} catalog at {} is not available ({e}); run scripts/testbed up",
            config.uri
        )
    })
}

#[tokio::test]
async fn catalogs_exchange_client_credentials_and_list_created_namespace() {
    for catalog in CATALOGS {
        let client = connect(catalog).await;
        let namespace = vec![unique_name("it_ns")];
        client
            .create_namespace(&namespace)
            .await
            .unwrap_or_else(|e| panic!("{catalog}: {e}"));
        let listed = client
            .list_namespaces(None)
            .await
            .unwrap_or_else(|e| panic!("{catalog}: {e}"));
        assert!(
            listed.contains(&namespace),
            "{catalog}: {namespace:?} missing from {listed:?}"
        );

        let again = client
            .create_namespace(&namespace)
            .await
            .expect_err("creating it twice must fail");
        assert_eq!(again.kind, CatalogErrorKind::Conflict, "{catalog}: {again}");

        client
            .drop_namespace(&namespace)
            .await
            .unwrap_or_else(|e| panic!("{catalog}: {e}"));
        let listed = client
            .list_namespaces(None)
            .await
            .unwrap_or_else(|e| panic!("{catalog}: {e}"));
        assert!(
            !listed.contains(&namespace),
            "{catalog}: {namespace:?} still listed after drop"
        );
    }
}

#[tokio::test]
async fn seaweed_catalog_refuses_a_wrong_client_secret() {
    let config = config("SEAWEED", Some("wrong-secret"));
    let err = RestCatalog::connect(&config)
        .await
        .expect_err("a wrong secret must not get a token");
    assert_eq!(err.kind, CatalogErrorKind::Unauthorized, "{err}");
    assert!(
        !err.to_string().contains("wrong-secret"),
        "the secret leaked into: {err}"
    );
}
