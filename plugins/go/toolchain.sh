# Sourced by plugins/go/build.sh and plugins/go/test.sh: the repository's Go toolchain, at
# the pinned versions of plugins/toolchain.sh (the one implementation, shared with the other
# languages and `kubewasm build`), installed under target/tools only when missing.
# Expects $root (the repository) to be set.

tools="$root/target/tools"
gen="$root/target/go" # generated bindings, go.work and build outputs of the seed plugins
# shellcheck source=../toolchain.sh
source "$root/plugins/toolchain.sh"
