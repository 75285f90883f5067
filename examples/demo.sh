#!/usr/bin/env bash
# The demo: build the example plugins, then run `kubewasm dev` on the examples: an embedded
# API server, the CRDs and sample objects applied, the host running the plugins the
# operator's approvals (plugins/approvals.yaml) allow, and a live log. A kubeconfig for kubectl is written to target/kubewasm-dev.kubeconfig.
# Extra arguments go to `kubewasm dev` (e.g. --port 6443). Ctrl-C stops it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash plugins/build.sh
cargo build -p kubewasm-cli
echo
echo "In another terminal:  kubectl --kubeconfig $root/target/kubewasm-dev.kubeconfig get contentsites,mongodb,services,servicemonitors"
echo
exec "$root/target/debug/kubewasm" dev \
    --plugins target/plugins/rust \
    --approvals plugins/approvals.yaml \
    --apply examples \
    --kubeconfig-out target/kubewasm-dev.kubeconfig \
    "$@"
