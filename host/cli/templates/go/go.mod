module example.com/{{name}}

go 1.27.1

require kubewasm.dev/kubewasm v0.0.0

require (
	go.bytecodealliance.org/pkg v0.4.0 // indirect
	kubewasm.dev/bindings v0.0.0 // indirect
)

// The kubewasm layer (and its opt-in typed helpers, kubewasm.dev/kubewasm/typed: import it
// and run `go mod tidy`), the bindings of wit/plugin.wit and the runtime package they
// import, vendored by `kubewasm new` (the versions of the kubewasm that wrote them):
// resolved from deps/, never from a module proxy, so `go mod tidy`, `go vet`, `go test` and
// gopls work offline. Your own requirements come from your GOPROXY as usual.
replace (
	go.bytecodealliance.org/pkg => ./deps/go-pkg
	kubewasm.dev/bindings => ./deps/bindings
	kubewasm.dev/kubewasm => ./deps/kubewasm-go
	kubewasm.dev/kubewasm/typed => ./deps/kubewasm-go/typed
)
