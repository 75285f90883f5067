#!/usr/bin/env bash
# Installs promtool, for tests/monitoring.rs's unit tests of the alert rules of
# deploy/kubernetes/components/monitoring: Debian's prometheus package, pinned, when
# missing. Idempotent. Needs root (apt-get), as on our machines and CI.
set -euo pipefail

prometheus_version="2.42.0+ds-5+deb12u1"

if [ ! -x /usr/bin/promtool ]; then
    export DEBIAN_FRONTEND=noninteractive
    # Only promtool is wanted: the package's service must not start. policy-rc.d
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
    if ! apt-get install -y --no-install-recommends "prometheus=$prometheus_version" >/dev/null; then
        # A stale package list does not know the version yet.
        apt-get update >/dev/null
        apt-get install -y --no-install-recommends "prometheus=$prometheus_version" >/dev/null
    fi
    cleanup
    trap - EXIT
fi
/usr/bin/promtool --version >&2
