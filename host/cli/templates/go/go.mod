module example.com/{{name}}

go 1.27

require kubewasm.dev/kubewasm v0.0.0

// The kubewasm layer, vendored by `kubewasm new` (the version of the kubewasm that wrote it).
replace kubewasm.dev/kubewasm => ./deps/kubewasm-go
