package main

import (
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

// Native unit test (no wasm runtime): `go test ./...` with the Go that `kubewasm build`
// installs (see README.md).
func TestCopiesWithTheSuffix(t *testing.T) {
	kwtest.Reset()
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "app", "namespace": "web",
			"labels": map[string]any{"kubewasm.dev/copy": "true"}},
		"data": map[string]any{"k": "v"},
	}
	out, err := kubewasm.CallHandle(Copier{}, kwtest.Added(WatchID, cm), `{"suffix": "bak"}`)
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, out, `[{"create": {"force": false, "ownedByTrigger": true, "object": {
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "app-bak", "namespace": "web",
			"annotations": {"kubewasm.dev/copied-from": "web/app"}},
		"data": {"k": "v"}}}}]`)
}
