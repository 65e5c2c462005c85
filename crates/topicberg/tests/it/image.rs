//! The container image (`scripts/image`), proven without a Docker engine:
//! built from this test binary's `topicberg`, pushed into a local registry
//! and exported back by go-containerregistry's `crane` (which checks every
//! digest), unpacked, and run from inside the unpacked root filesystem
//! (`chroot`, as the image's non-root user): a real sync of a topic into
//! the test bed's catalog, read back by DuckDB.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::fault_injection::check_append;
use crate::serve_support::free_port;
use crate::support::{create_topic, produce, wait_until, Catalog, Job, Running};
use crate::testbed::{repo_root, unique_name};

/// `crane`, built by `scripts/install-go-tools` (`.cache/go-bin`, or
/// `$TOPICBERG_CACHE/go-bin`).
fn crane() -> PathBuf {
    let cache = std::env::var_os("TOPICBERG_CACHE")
        .map_or_else(|| repo_root().join(".cache"), PathBuf::from);
    let crane = cache.join("go-bin/crane");
    assert!(
        crane.exists(),
        "{} is missing: run scripts/install-go-tools",
        crane.display()
    );
    crane
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The image pushed to a registry on 127.0.0.1 and exported back as one
/// root filesystem, unpacked into `rootfs`.
fn through_a_registry(layout: &Path, rootfs: &Path) {
    let port = free_port();
    let registry = Running(
        Command::new(crane())
            .args([
                "registry",
                "serve",
                "--address",
                &format!("127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("crane registry serve"),
    );
    let reference = format!("127.0.0.1:{port}/topicberg:it");
    wait_until("the registry to answer", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    run(
        Command::new(crane())
            .args(["push", "--insecure"])
            .arg(layout)
            .arg(&reference),
        "crane push",
    );
    let exported = rootfs.with_extension("tar");
    run(
        Command::new(crane())
            .args(["export", "--insecure", &reference])
            .arg(&exported),
        "crane export",
    );
    drop(registry);
    std::fs::create_dir_all(rootfs).unwrap();
    run(
        Command::new("tar")
            .arg("-xf")
            .arg(&exported)
            .arg("-C")
            .arg(rootfs),
        "unpacking the exported image",
    );
}

#[test]
fn the_image_unpacked_runs_a_real_sync_from_its_own_root_filesystem() {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "chroot needs root: run the tests as root (as CI does)"
    );
    let topic = unique_name("image");
    create_topic(&topic, 2);
    let ids: Vec<u64> = (0..500).collect();
    let messages: Vec<(String, String)> = ids
        .iter()
        .map(|id| (id.to_string(), format!("{{\"id\": {id}}}")))
        .collect();
    produce(&topic, &messages);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let dir = job.path.parent().unwrap().to_path_buf();
    let layout = dir.join("image");
    run(
        Command::new(repo_root().join("scripts/image"))
            .arg("--binary")
            .arg(env!("CARGO_BIN_EXE_topicberg"))
            .arg("--out")
            .arg(&layout),
        "scripts/image",
    );
    let rootfs = dir.join("rootfs");
    through_a_registry(&layout, &rootfs);
    std::fs::create_dir_all(rootfs.join("job")).unwrap();
    std::fs::copy(&job.path, rootfs.join("job/job.toml")).unwrap();
    let out = Command::new("chroot")
        .args(["--userspec=65532:65532"])
        .arg(&rootfs)
        .args([
            "/usr/local/bin/topicberg",
            "sync",
            "-c",
            "/job/job.toml",
            "--state-dir",
            "/var/lib/topicberg",
        ])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env(
            "TESTBED_S3_SECRET_KEY",
            crate::testbed::get("TESTBED_S3_SECRET_KEY"),
        )
        .output()
        .expect("chroot");
    assert!(
        out.status.success(),
        "the sync inside the image failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    check_append("duckdb", &job.table(&topic), &ids, 0);
}
