//go:build wasip1

package host

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	witHost "kubewasm.dev/bindings/imports/kubewasm_plugin_host"
)

func option(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func get(apiVersion, kind, namespace, name string) (string, bool, error) {
	r := witHost.Get(apiVersion, kind, option(namespace), name)
	if r.IsErr() {
		return "", false, hostError("get", kind, r.Err())
	}
	o := r.Ok()
	if o.IsNone() {
		return "", false, nil
	}
	return o.Some(), true, nil
}

func list(apiVersion, kind, namespace, labelSelector string) ([]string, error) {
	r := witHost.List(apiVersion, kind, option(namespace), option(labelSelector))
	if r.IsErr() {
		return nil, hostError("list", kind, r.Err())
	}
	return r.Ok(), nil
}
