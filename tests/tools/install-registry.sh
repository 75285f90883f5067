#!/usr/bin/env bash
# Installs what tests/oci.rs needs, at pinned versions, when missing:
#   - Debian's docker-registry package (the CNCF distribution registry, v2.8), whose
#     /usr/bin/docker-registry the tests start on a loopback port of their own;
#   - the `oras` Python package from PyPI, the standard client of the interop tests.
# Idempotent: what is there is kept. Needs root (apt-get), as on our machines and CI.
set -euo pipefail
. "$(dirname "$0")/apt.sh"

registry_version="2.8.2+ds1-1"
oras_version="0.2.43"

if [ ! -x /usr/bin/docker-registry ]; then
    apt_install_without_services "docker-registry=$registry_version"
fi
/usr/bin/docker-registry --version >&2

if ! python3 -c 'import oras' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "oras==$oras_version"
fi
python3 -c 'import oras, sys; print("oras", oras.__version__, file=sys.stderr)'
