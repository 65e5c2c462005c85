// Sources (the job file's [source]) and destinations ([destination]):
// every setting as a labelled field with short help, grouped.
"use strict";

const SOURCE_GROUPS = [
  ["Kafka", [
    { key: "bootstrap_servers", label: "Brokers", help: "host:port of one or more brokers, comma separated" },
    { key: "topic_pattern", label: "Topic pattern", help: "a regular expression; the topics it matches are offered on a job's streams page (e.g. ^(customers|orders)$)" },
    { key: "consumer_group", label: "Consumer group", help: "the group whose committed offsets show progress in Kafka's tools; empty: topicberg_<job name>" },
    { key: "max_threads", label: "Max threads", type: "number", help: "partitions read in parallel; empty: the default" },
    { key: "fetch", label: "Fetch", type: "select", options: [["", "(default: auto)"], "auto", "librdkafka"], help: "auto: topicberg's own record-batch reader on PLAINTEXT brokers, librdkafka with TLS or SASL; librdkafka: always librdkafka" },
  ]],
  ["Security", [
    { key: "security_protocol", label: "Security protocol", type: "select", options: ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"], new_default: "PLAINTEXT", stored_default: "PLAINTEXT", help: "SSL and SASL_SSL encrypt; the SASL ones log in" },
    { key: "sasl_mechanism", label: "SASL mechanism", type: "select", options: [["", "(none)"], "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"], help: "needed with SASL_PLAINTEXT and SASL_SSL; OAUTHBEARER logs in with a token from the token endpoint below" },
    { key: "sasl_username", label: "SASL user", help: "PLAIN and SCRAM (Confluent Cloud: the API key)" },
    { key: "sasl_password", label: "SASL password", type: "secret", help: "PLAIN and SCRAM (Confluent Cloud: the API secret)" },
    { key: "ssl_ca_pem", label: "CA certificate", type: "textarea", help: "brokers signed by a private CA (SSL, SASL_SSL): its PEM text, or a file path relative to the data folder" },
    { key: "ssl_certificate_pem", label: "Client certificate", type: "textarea", help: "mutual TLS (e.g. Amazon MSK's TLS authentication): the certificate's PEM text, or a file path; with the client key" },
    { key: "ssl_key_pem", label: "Client certificate key", type: "secret", help: "the client certificate's private key, unencrypted PEM text or a file path" },
    { key: "ssl_verify_hostname", label: "Check the brokers' host names", type: "bool", unset: "(yes)", help: "no: accept a broker certificate issued for any host name (only for brokers reached by an address their certificate does not list)" },
    { key: "oauth_token_endpoint", label: "OAuth token endpoint", help: "OAUTHBEARER: the identity provider's token URL (client credentials grant)" },
    { key: "oauth_client_id", label: "OAuth client id", help: "OAUTHBEARER" },
    { key: "oauth_client_secret", label: "OAuth client secret", type: "secret", help: "OAUTHBEARER" },
    { key: "oauth_scope", label: "OAuth scope", help: "OAUTHBEARER: the scope to ask for; empty: none" },
  ]],
  ["Schema registry", [
    { key: "schema_registry_url", label: "Schema registry URL", help: "a Confluent-compatible registry (http:// or https://), for Avro and Protobuf topics; empty: every topic is JSON" },
    { key: "schema_registry_username", label: "Registry user", help: "basic auth (Confluent Cloud: the API key)" },
    { key: "schema_registry_password", label: "Registry password", type: "secret", help: "Confluent Cloud: the API secret" },
    { key: "schema_registry_ca_pem", label: "Registry CA certificate", type: "textarea", help: "an https registry behind a private CA: its PEM text, or a file path" },
  ]],
];

const DESTINATION_GROUPS = [
  ["Catalog", [
    { key: "catalog", label: "Catalog", type: "select", options: [["rest", "REST catalog (Polaris, Nessie, Unity, ...)"], ["sql", "embedded (SQLite in the data folder)"]], new_default: "rest", stored_default: "sql" },
    { key: "uri", label: "Catalog URL", help: "REST: the catalog's base URL, without /v1" },
    { key: "warehouse", label: "Warehouse", help: "REST: the warehouse the catalog serves (its name); embedded: where the table files go, an s3://, gs:// or abfss:// URI (empty: the catalog folder)" },
    { key: "path", label: "Catalog folder", help: "embedded: the folder of its SQLite file (and of the table files without a warehouse), relative to the data folder; empty: warehouse" },
    { key: "format_version", label: "Format version", type: "select", numeric: true, options: [["", "(from the target engines; 2 otherwise)"], ["2", "2"], ["3", "3"]], help: "of the tables topicberg creates" },
  ]],
  ["Catalog login", [
    { key: "credential", label: "OAuth2 client credentials", type: "secret", help: "client_id:client_secret, exchanged for a token (or a bearer token below, not both)" },
    { key: "oauth2_server_uri", label: "OAuth2 token URI", help: "empty: <catalog URL>/v1/oauth/tokens" },
    { key: "scope", label: "OAuth2 scope", help: "e.g. PRINCIPAL_ROLE:ALL for Polaris" },
    { key: "token", label: "Bearer token", type: "secret", help: "a static token (Unity: a personal access token)" },
    { key: "ca_pem", label: "CA certificate", type: "textarea", help: "an https catalog, token endpoint or store behind a private CA: its PEM text, or a file path" },
  ]],
  ["S3 storage", [
    { key: "s3_endpoint", label: "S3 endpoint", help: "a non-AWS store (MinIO, SeaweedFS); empty for AWS or when the catalog hands it out" },
    { key: "s3_region", label: "S3 region" },
    { key: "s3_access_key", label: "S3 access key" },
    { key: "s3_secret_key", label: "S3 secret key", type: "secret" },
    { key: "s3_path_style", label: "S3 path-style addressing", type: "bool", unset: "(yes with an endpoint)" },
  ]],
  ["Azure and Google Cloud storage", [
    { key: "azure_account", label: "Azure storage account", help: "for az:// locations (abfss:// names its own); empty: AZURE_STORAGE_ACCOUNT_NAME" },
    { key: "azure_access_key", label: "Azure account key", type: "secret", help: "empty: the environment's chain (SAS, service principal, managed identity)" },
    { key: "azure_endpoint", label: "Azure Blob endpoint", help: "an emulator or private endpoint, the account in its path; empty: Azure's own" },
    { key: "gcs_service_account_path", label: "GCS service account file", help: "a key file (JSON); empty: application default credentials" },
  ]],
];

async function piecesPage(kind, selected) {
  const plural = `${kind}s`;
  const list = await api("GET", `/api/${plural}`);
  const current = selected && selected !== "new" ? list.find((p) => p.id === +selected) : null;
  show(
    h("h1", {}, kind === "source" ? "Sources (Kafka)" : "Destinations (Iceberg)"),
    h("table", {},
      h("tr", {}, h("th", {}, "Name"), h("th", {}, kind === "source" ? "Brokers" : "Catalog")),
      list.map((p) => h("tr", {},
        h("td", {}, h("a", { href: `#/${plural}/${p.id}` }, p.name)),
        h("td", {}, kind === "source" ? p.bootstrap_servers : `${p.catalog || "sql"} ${p.uri || p.warehouse || p.path || ""}`)))),
    h("p", {}, h("a", { class: "button", href: `#/${plural}/new`, id: `new-${kind}` }, `New ${kind}`)),
    selected ? pieceForm(kind, current) : null);
}

function pieceForm(kind, current) {
  const plural = `${kind}s`;
  const groups = (kind === "source" ? SOURCE_GROUPS : DESTINATION_GROUPS)
    .map(([title, specs]) => [title, specs.map((s) => field(kind, s, current))]);
  const fields = groups.flatMap(([, fs]) => fs);
  const name = field(kind, { key: "name", label: "Name", help: "how jobs refer to it" }, current);
  const msg = h("div", { id: `${kind}-result` }, takeFlash());
  // The piece to send, or null when a field cannot be sent (its problem
  // is shown next to it). Starts from what is stored, so fields nobody
  // changed (and settings of an imported job) are kept.
  const body = () => {
    const out = {};
    for (const [k, v] of Object.entries(current || {})) if (k !== "id") out[k] = v;
    out.name = name.input.value;
    if (applyFields(fields, out, !current)) {
      msg.replaceChildren(banner("bad", "Not saved: fix the fields marked below."));
      return null;
    }
    return out;
  };
  const resolve = (path) => {
    const m = new RegExp(`^${kind}\\.(\\w+)$`).exec(path);
    if (path === "name") return name;
    return m ? fields.find((f) => f.spec.key === m[1]) || null : null;
  };
  const save = async (piece) => {
    if (current) return api("PUT", `/api/${plural}/${current.id}`, piece);
    return api("POST", `/api/${plural}`, piece);
  };
  return h("form", {
    class: "card", id: `${kind}-form`, novalidate: true,
    onsubmit: async (ev) => {
      ev.preventDefault();
      const piece = body();
      if (!piece) return;
      try {
        const saved = await save(piece);
        flash = `Saved ${saved.name}.`;
        go(`#/${plural}/${saved.id}`);
      } catch (e) { if (e.status !== 401) showProblems(e, msg, resolve); }
    },
  },
    h("h2", {}, current ? `Edit ${current.name}` : `New ${kind}`),
    name.el,
    groups.map(([title, fs]) => fieldset(title, fs)),
    h("p", { class: "actions" },
      h("button", { class: "primary", type: "submit", id: `${kind}-save` }, "Save"),
      h("button", {
        type: "button", id: `${kind}-test`,
        onclick: async () => {
          // Tests what the form shows, saved or not (the stored secrets
          // of this piece are used where the form keeps them).
          const piece = body();
          if (!piece) return;
          // A save just before may have drawn the form again: the result
          // goes to the form on the page.
          const shown = () => document.getElementById(`${kind}-result`) || msg;
          shown().replaceChildren(h("p", {}, "Testing…"));
          try {
            if (current) piece.id = current.id;
            const r = await api("POST", `/api/${plural}/test`, piece);
            const steps = r.steps || [];
            const ok = steps.every((s) => s.ok);
            shown().replaceChildren(banner(ok ? "ok" : "bad", ok ? "Connection OK" : "Connection failed"),
              h("ul", {}, steps.map((s) => [
                h("li", { class: s.ok ? "ok" : "bad" }, `${s.step}: ${s.message}`),
                (s.warnings || []).map((w) => h("li", { class: "warn" }, `${s.step}: warning: ${w}`))])));
          } catch (e) { if (e.status !== 401) showProblems(e, shown(), resolve); }
        },
      }, "Test connection"),
      current ? h("button", {
        type: "button", id: `${kind}-delete`,
        onclick: async () => {
          if (!confirm(`Delete ${kind} ${current.name}? This cannot be undone.`)) return;
          try { await api("DELETE", `/api/${plural}/${current.id}`); flash = `Deleted ${current.name}.`; go(`#/${plural}`); }
          catch (e) { msg.replaceChildren(errorBanner(e)); }
        },
      }, "Delete") : null),
    msg);
}
