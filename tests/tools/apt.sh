# Sourced by the install scripts of tests/tools: apt_install_without_services PKG=VERSION
# installs a pinned Debian package whose service must not start (the tests start their
# own processes, and nothing may linger on a port). policy-rc.d answering 101 is how
# Debian says "do not start services"; ours is removed afterwards unless one was already
# there. A stale package list that does not know the version yet is refreshed once.
apt_install_without_services() {
    local package=$1 policy=/usr/sbin/policy-rc.d ours=""
    export DEBIAN_FRONTEND=noninteractive
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod 0755 "$policy"
        ours=1
    fi
    local status=0
    if ! apt-get install -y --no-install-recommends "$package" >/dev/null; then
        apt-get update >/dev/null
        apt-get install -y --no-install-recommends "$package" >/dev/null || status=$?
    fi
    if [ -n "$ours" ]; then rm -f "$policy"; fi
    return "$status"
}
