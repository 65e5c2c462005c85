//! Where the test bed's servers are: `scripts/testbed env` is the single
//! source of truth; a `TESTBED_*` variable already in the environment wins.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn exports() -> &'static HashMap<String, String> {
    static EXPORTS: OnceLock<HashMap<String, String>> = OnceLock::new();
    EXPORTS.get_or_init(|| {
        let script = repo_root().join("scripts/testbed");
        let out = Command::new(&script)
            .arg("env")
            .output()
            .unwrap_or_else(|e| panic!("running {} env: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} env failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.strip_prefix("export "))
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

/// The value of a `TESTBED_*` setting.
pub fn get(name: &str) -> String {
    std::env::var(name)
        .ok()
        .or_else(|| exports().get(name).cloned())
        .unwrap_or_else(|| panic!("{name} is not set and `scripts/testbed env` does not print it"))
}

/// A command run from the repository root with every `TESTBED_*` setting
/// in its environment (for the reader scripts).
pub fn command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(repo_root());
    for name in exports().keys() {
        cmd.env(name, get(name));
    }
    cmd
}

/// A fresh name for a topic, namespace or table: `<what>_<random hex>`.
pub fn unique_name(what: &str) -> String {
    format!("{what}_{}", uuid::Uuid::new_v4().simple())
}
