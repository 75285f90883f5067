module kubewasm.dev/kubewasm/typed

go 1.27

// The layer: from the workspace (plugins/go/go.work) in this repository, and from the
// project's replace directive (deps/kubewasm-go) in a `kubewasm new` project.
require kubewasm.dev/kubewasm v0.0.0
