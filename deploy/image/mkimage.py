#!/usr/bin/env python3
"""Write the kubewasm image (or a plugin image on top of it) as a docker-archive tarball.

    mkimage.py --tag REF --binary FILE --ca-file FILE [--plugins DIR] OUT.tar

Called by deploy/build-image.sh (see there). The image is what deploy/Dockerfile's final
stage (`FROM scratch`) holds, entry for entry; tests/image.rs checks that they agree.

Python's standard library, not a Rust helper in the workspace: `tarfile`, `json` and
`hashlib` give full control of every header (mtime, uid/gid, mode, order) with nothing to
compile or pin, and the machines and CI have python3 already (tests/run.sh uses it).

Reproducible: entries sorted, numeric owners with empty user/group names, every mtime and
the config's `created` set to SOURCE_DATE_EPOCH (default 0), config JSON with sorted keys.
Same inputs (binary, CA bundle, deploy/image/rootfs, plugin files), same bytes.
"""

import argparse
import datetime
import hashlib
import io
import json
import os
import struct
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOTFS = os.path.join(HERE, "rootfs")
USER = "65532:65532"
UID = GID = 65532
BINARY = "usr/local/bin/kubewasm"
CA = "etc/ssl/certs/ca-certificates.crt"
CACHE_DIR = "var/cache/kubewasm"
PLUGIN_DIR = "plugins"
ENV = [
    # What a container runtime sets when an image has no PATH; explicit so that every
    # builder (BuildKit adds it to scratch images) writes the same config.
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "KUBEWASM_CACHE_DIR=/" + CACHE_DIR,
]
ENTRYPOINT = ["/" + BINARY]
CMD = ["run", "--plugins", "/plugins", "--cache-dir", "/var/cache/kubewasm", "--log-format", "json"]
# A plugin image run on its own copies its plugins to /target (the init container's volume).
PLUGIN_CMD = ["copy-plugins", "/plugins", "/target"]
EXPOSED_PORTS = {"9090/tcp": {}}


def fail(msg):
    print(f"mkimage.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def check_static(path):
    """Refuse an ELF executable that needs a dynamic loader or shared libraries."""
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        fail(f"{path} is not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if p_type == 3:  # PT_INTERP
            fail(f"{path} is dynamically linked (it names a program interpreter)")
        if p_type == 2:  # PT_DYNAMIC: a static-pie has one, without DT_NEEDED
            for off in range(p_offset, p_offset + p_filesz, 16):
                tag, _ = struct.unpack_from("<qQ", elf, off)
                if tag == 0:
                    break
                if tag == 1:
                    fail(f"{path} needs shared libraries (DT_NEEDED)")


class Layer:
    """A layer tar built in memory from (path, attributes, bytes) entries."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.entries = {}

    def dir(self, path, uid=0, gid=0, mode=0o755):
        # Parents first, root-owned, as `mkdir -p` and Docker's COPY make them.
        parent = os.path.dirname(path)
        if parent and parent not in self.entries:
            self.dir(parent)
        self.entries[path] = (tarfile.DIRTYPE, uid, gid, mode, None)

    def file(self, path, data, uid=0, gid=0, mode=0o644):
        parent = os.path.dirname(path)
        if parent and parent not in self.entries:
            self.dir(parent)
        self.entries[path] = (tarfile.REGTYPE, uid, gid, mode, data)

    def bytes(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for path in sorted(self.entries, key=lambda p: p.split("/")):
                kind, uid, gid, mode, data = self.entries[path]
                ti = tarfile.TarInfo(path)
                ti.type, ti.uid, ti.gid, ti.mode = kind, uid, gid, mode
                ti.uname = ti.gname = ""
                ti.mtime = self.mtime
                if data is None:
                    t.addfile(ti)
                else:
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))
        return buf.getvalue()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def host_layer(mtime, binary, ca_file):
    layer = Layer(mtime)
    for dirpath, dirnames, filenames in os.walk(ROOTFS):
        dirnames.sort()
        for name in sorted(filenames):
            src = os.path.join(dirpath, name)
            layer.file(os.path.relpath(src, ROOTFS), read(src))
    layer.file(CA, read(ca_file))
    layer.file(BINARY, read(binary), mode=0o755)
    layer.dir(CACHE_DIR, UID, GID)
    layer.dir(PLUGIN_DIR, UID, GID)
    return layer


def plugin_layer(mtime, plugins):
    layer = Layer(mtime)
    layer.dir(PLUGIN_DIR, UID, GID)
    names = sorted(n for n in os.listdir(plugins) if n.endswith((".wasm", ".yaml")))
    if not any(n.endswith(".wasm") for n in names):
        fail(f"no .wasm file in {plugins}")
    for name in names:
        src = os.path.join(plugins, name)
        if not os.path.isfile(src):
            fail(f"{src} is not a file")
        layer.file(f"{PLUGIN_DIR}/{name}", read(src), mode=0o444)
    return layer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--ca-file", required=True)
    ap.add_argument("--plugins", metavar="DIR")
    ap.add_argument("out")
    a = ap.parse_args()

    mtime = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    created = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    check_static(a.binary)
    layers = [("deploy/build-image.sh: kubewasm " + a.tag, host_layer(mtime, a.binary, a.ca_file).bytes())]
    if a.plugins:
        layers.append(("deploy/build-image.sh --plugins: /plugins", plugin_layer(mtime, a.plugins).bytes()))
    diff_ids = ["sha256:" + hashlib.sha256(b).hexdigest() for _, b in layers]

    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": USER,
            "Env": ENV,
            "Entrypoint": ENTRYPOINT,
            "Cmd": PLUGIN_CMD if a.plugins else CMD,
            "ExposedPorts": EXPOSED_PORTS,
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": created, "created_by": by} for by, _ in layers],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    image_id = hashlib.sha256(config_bytes).hexdigest()
    layer_names = [d[len("sha256:"):] + "/layer.tar" for d in diff_ids]
    manifest = [{"Config": image_id + ".json", "RepoTags": [a.tag], "Layers": layer_names}]
    repo, _, tag = a.tag.rpartition(":")
    if not repo or "/" in tag:
        fail(f"--tag {a.tag}: expected REPOSITORY:TAG")

    # No legacy `repositories` index: it would name v1 layer IDs with their own json files;
    # every loader since Docker 1.10 (and podman, containerd) reads manifest.json.
    files = {
        image_id + ".json": config_bytes,
        "manifest.json": json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode(),
    }
    for name, (_, b) in zip(layer_names, layers):
        files[name] = b
    tmp = a.out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as t:
        dirs = set()
        for name in sorted(files, key=lambda p: p.split("/")):
            parent = os.path.dirname(name)
            if parent and parent not in dirs:
                dirs.add(parent)
                ti = tarfile.TarInfo(parent)
                ti.type, ti.mode, ti.mtime, ti.uname, ti.gname = tarfile.DIRTYPE, 0o755, mtime, "", ""
                t.addfile(ti)
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime, ti.uname, ti.gname = len(files[name]), 0o644, mtime, "", ""
            t.addfile(ti, io.BytesIO(files[name]))
    os.replace(tmp, a.out)

    binary_size = os.path.getsize(a.binary)
    print(f"image     {a.tag}")
    print(f"id        sha256:{image_id}")
    for d, (_, b) in zip(diff_ids, layers):
        print(f"layer     {d}  {len(b)} bytes ({len(b) / 2**20:.1f} MiB)")
    print(f"binary    {binary_size} bytes ({binary_size / 2**20:.1f} MiB), static")
    size = os.path.getsize(a.out)
    print(f"archive   {a.out}  {size} bytes ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
