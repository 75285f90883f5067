#!/usr/bin/env bash
# Installs promtool, for tests/monitoring.rs's unit tests of the alert rules of
# deploy/kubernetes/components/monitoring: Debian's prometheus package, pinned, when
# missing. Idempotent. Needs root (apt-get), as on our machines and CI.
set -euo pipefail
. "$(dirname "$0")/apt.sh"

prometheus_version="2.42.0+ds-5+deb12u1"

if [ ! -x /usr/bin/promtool ]; then
    apt_install_without_services "prometheus=$prometheus_version"
fi
/usr/bin/promtool --version >&2
