#!/usr/bin/env python3
"""Builds a Go module proxy in a folder (for GOPROXY=file://OUT) from a Kubernetes source
tree: every module of its vendor/modules.txt, from vendor/ (third-party modules: the
packages Kubernetes vendors) or staging/ (the k8s.io staging modules, served at the tree's
release version), each with a go.mod of its own that names it and nothing else, so the
module graph is flat and `go mod tidy` in a project lists exactly what it uses.

Used by the opt-in k8s.io/api test of tests/new_project.rs (KUBEWASM_K8S_SRC).

    go-file-proxy.py SRC OUT [STAGING_VERSION]
"""
import json
import os
import re
import sys
import zipfile

src, out = sys.argv[1], sys.argv[2]
staging_version = sys.argv[3] if len(sys.argv) > 3 else "v0.36.2"
SAFE = re.compile(r"^[A-Za-z0-9._+~/-]+$")


def modules(path):
    """(module, version, folder, go) for every module vendor/modules.txt lists."""
    found = {}
    current = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# "):
                parts = line[2:].split()
                current = None
                if len(parts) < 2 or not parts[1].startswith("v"):
                    continue  # a replacement-only line
                mod, version = parts[0], parts[1]
                if len(parts) >= 4 and parts[2] == "=>" and parts[3].startswith("./"):
                    folder, version = os.path.join(src, parts[3]), staging_version
                else:
                    folder = os.path.join(src, "vendor", mod)
                current = found.setdefault(mod, {"version": version, "folder": folder, "go": None})
            elif line.startswith("## ") and current is not None:
                m = re.search(r"go (\d+\.\d+(\.\d+)?)", line)
                if m:
                    current["go"] = m.group(1)
    return found


def files(folder, nested):
    """The module's files: none under a nested module's folder, a vendor folder or .git."""
    for root, dirs, names in os.walk(folder):
        rel_root = os.path.relpath(root, folder)
        dirs[:] = [
            d for d in dirs
            if d not in ("vendor", ".git")
            and os.path.normpath(os.path.join(root, d)) not in nested
        ]
        for name in names:
            rel = os.path.normpath(os.path.join(rel_root, name))
            if name == "go.mod" or name == "go.sum" or not SAFE.match(rel):
                continue
            full = os.path.join(root, name)
            if os.path.isfile(full) and not os.path.islink(full):
                yield rel, full


mods = modules(os.path.join(src, "vendor/modules.txt"))
folders = {os.path.normpath(m["folder"]) for m in mods.values()}
count = 0
for mod, m in sorted(mods.items()):
    folder = os.path.normpath(m["folder"])
    if not os.path.isdir(folder):
        continue
    nested = {f for f in folders if f != folder and f.startswith(folder + os.sep)}
    version = m["version"]
    go_mod = f"module {mod}\n" + (f"\ngo {m['go']}\n" if m["go"] else "")
    # The proxy protocol's case encoding: an upper-case letter is "!" and its lower case.
    at = os.path.join(out, re.sub(r"[A-Z]", lambda c: "!" + c.group(0).lower(), mod), "@v")
    os.makedirs(at, exist_ok=True)
    with open(os.path.join(at, "list"), "w") as f:
        f.write(version + "\n")
    with open(os.path.join(at, version + ".info"), "w") as f:
        json.dump({"Version": version, "Time": "2026-01-01T00:00:00Z"}, f)
    with open(os.path.join(at, version + ".mod"), "w") as f:
        f.write(go_mod)
    prefix = f"{mod}@{version}/"
    with zipfile.ZipFile(os.path.join(at, version + ".zip"), "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "go.mod", go_mod)
        for rel, full in files(folder, nested):
            z.write(full, prefix + rel)
    count += 1
print(f"{count} modules in {out}")
