#!/usr/bin/env python3
"""Assembles topicberg's container image as an OCI image layout, with no
Docker engine: one layer holding the binary, the shared libraries `ldd`
says it loads (copied from this machine's packages), the CA bundle, a
non-root user (65532) and its writable state folder; a config whose
entrypoint is the binary. Deterministic: every file's owner and mtime are
fixed, so the same inputs give the same digests.

usage: oci.py BINARY OUT_DIR [--tag TAG]
OUT_DIR receives oci-layout, index.json and blobs/sha256/ (an OCI image
layout, read by crane, skopeo, umoci and podman), and OUT_DIR.tar (the
same as one tarball, for `crane push`)."""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

USER = 65532
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
STATE_DIR = "var/lib/topicberg"


def shared_libraries(binary):
    """Every path `ldd` resolves for the binary, the loader included."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        m = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            paths.append(m.group(1))
        elif "not found" in line:
            sys.exit(f"oci.py: {binary} needs a library this machine lacks: {line.strip()}")
    return sorted(set(paths))


def add_dir(tar, name, mode=0o755, uid=0):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, mode, uid, uid, 0
    tar.addfile(info)


def add_bytes(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, 0, 0, 0
    tar.addfile(info, io.BytesIO(data))


def layer(binary):
    """The layer's tar bytes."""
    files = {"usr/local/bin/topicberg": (open(binary, "rb").read(), 0o755)}
    for path in shared_libraries(binary):
        files[path.lstrip("/")] = (open(os.path.realpath(path), "rb").read(), 0o755)
    files[CA_BUNDLE.lstrip("/")] = (open(CA_BUNDLE, "rb").read(), 0o644)
    files["etc/passwd"] = (f"root:x:0:0:root:/root:/sbin/nologin\ntopicberg:x:{USER}:{USER}:topicberg:/{STATE_DIR}:/sbin/nologin\n".encode(), 0o644)
    files["etc/group"] = (f"root:x:0:\ntopicberg:x:{USER}:\n".encode(), 0o644)
    files["etc/nsswitch.conf"] = (b"hosts: files dns\n", 0o644)
    dirs = {"tmp": (0o1777, 0), STATE_DIR: (0o755, USER)}
    for name in files:
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.setdefault("/".join(parts[:i]), (0o755, 0))
    for name in list(dirs):
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.setdefault("/".join(parts[:i]), (0o755, 0))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(dirs):
            mode, uid = dirs[name]
            add_dir(tar, name, mode, uid)
        for name in sorted(files):
            data, mode = files[name]
            add_bytes(tar, name, data, mode)
    return buf.getvalue()


def blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(out, "blobs", "sha256", digest)
    with open(path, "wb") as f:
        f.write(data)
    return f"sha256:{digest}", len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out")
    ap.add_argument("--tag", default="topicberg:latest")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "blobs", "sha256"), exist_ok=True)
    tar = layer(args.binary)
    diff_id = "sha256:" + hashlib.sha256(tar).hexdigest()
    layer_digest, layer_size = blob(args.out, gzip.compress(tar, compresslevel=6, mtime=0))
    config = {
        "created": "1970-01-01T00:00:00Z",
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": f"{USER}:{USER}",
            "Entrypoint": ["/usr/local/bin/topicberg"],
            "Cmd": ["--help"],
            "WorkingDir": f"/{STATE_DIR}",
            "Env": ["PATH=/usr/local/bin", f"SSL_CERT_FILE={CA_BUNDLE}"],
            "ExposedPorts": {"8000/tcp": {}, "9464/tcp": {}},
            "Labels": {"org.opencontainers.image.title": "topicberg"},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/image"}],
    }
    config_digest, config_size = blob(args.out, json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest, "size": layer_size}],
    }
    manifest_digest, manifest_size = blob(args.out, json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": manifest_size,
                       "annotations": {"org.opencontainers.image.ref.name": args.tag}}],
    }
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, sort_keys=True)
    with open(os.path.join(args.out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with tarfile.open(args.out.rstrip("/") + ".tar", "w") as t:
        for name in ["oci-layout", "index.json", "blobs"]:
            t.add(os.path.join(args.out, name), arcname=name)
    print(f"{args.tag} {manifest_digest}: layer {layer_size} bytes (gzip), {len(tar)} bytes (tar)")


if __name__ == "__main__":
    main()
