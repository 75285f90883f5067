#!/usr/bin/env bash
# Installs what tests/oci.rs needs, at pinned versions, when missing:
#   - Debian's docker-registry package (the CNCF distribution registry, v2.8), whose
#     /usr/bin/docker-registry the tests start on a loopback port of their own;
#   - the `oras` Python package from PyPI, the standard client of the interop tests.
# Idempotent: what is there is kept. Needs root (apt-get), as on our machines and CI.
set -euo pipefail

registry_version="2.8.2+ds1-1"
oras_version="0.2.43"

if [ ! -x /usr/bin/docker-registry ]; then
    export DEBIAN_FRONTEND=noninteractive
    # The package's postinst starts its service through invoke-rc.d; the tests start their
    # own registries, so no service may start (nor linger on port 5000). policy-rc.d
    # answering 101 is how Debian says "do not start services"; ours is removed afterwards
    # unless one was already there.
    policy=/usr/sbin/policy-rc.d
    ours=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod 0755 "$policy"
        ours=1
    fi
    cleanup() { if [ -n "$ours" ]; then rm -f "$policy"; fi; }
    trap cleanup EXIT
    if ! apt-get install -y --no-install-recommends "docker-registry=$registry_version" >/dev/null; then
        # A stale package list does not know the version yet.
        apt-get update >/dev/null
        apt-get install -y --no-install-recommends "docker-registry=$registry_version" >/dev/null
    fi
    cleanup
    trap - EXIT
fi
/usr/bin/docker-registry --version >&2

if ! python3 -c 'import oras' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "oras==$oras_version"
fi
python3 -c 'import oras, sys; print("oras", oras.__version__, file=sys.stderr)'
