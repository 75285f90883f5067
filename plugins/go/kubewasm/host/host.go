// Package host reads the kubewasm host's caches: the listers of a controller, without the
// informers. The host keeps one cache per kind the plugin watches or declares in
// Manifest.Reads; Get and List read it (no API call).
//
// Errors from the host (a kind not watched or declared in reads, a cache not ready yet) are
// retryable *kubewasm.HandleErrors: return them from Handle and the host retries the event.
// An object that does not decode into your type is a permanent error.
//
// Outside the component (go test) both read the fake cluster of package kwtest.
package host

import (
	"kubewasm.dev/kubewasm"
)

// Get reads one object; namespace is "" for cluster-scoped kinds. found is false when there
// is no such object.
func Get(apiVersion, kind, namespace, name string) (obj kubewasm.Unstructured, found bool, err error) {
	text, found, err := get(apiVersion, kind, namespace, name)
	if err != nil || !found {
		return nil, false, err
	}
	obj, err = kubewasm.ParseUnstructured([]byte(text))
	if err != nil {
		return nil, false, kubewasm.Permanentf("host.get %s %s: %v", kind, name, err)
	}
	return obj, true, nil
}

// GetInto reads one object into a typed value (a pointer to your struct, json tags).
func GetInto(apiVersion, kind, namespace, name string, into any) (found bool, err error) {
	text, found, err := get(apiVersion, kind, namespace, name)
	if err != nil || !found {
		return false, err
	}
	ev := kubewasm.NewEvent(kubewasm.Resync, "", text, "")
	if err := ev.Object(into); err != nil {
		return false, kubewasm.Permanentf("host.get %s %s: %v", kind, name, err)
	}
	return true, nil
}

// List reads the objects of a kind, in one namespace ("" for all) and matching a label
// selector ("" for all), like a lister's List(selector).
func List(apiVersion, kind, namespace, labelSelector string) ([]kubewasm.Unstructured, error) {
	texts, err := list(apiVersion, kind, namespace, labelSelector)
	if err != nil {
		return nil, err
	}
	out := make([]kubewasm.Unstructured, 0, len(texts))
	for _, text := range texts {
		obj, err := kubewasm.ParseUnstructured([]byte(text))
		if err != nil {
			return nil, kubewasm.Permanentf("host.list %s: %v", kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// ListInto reads the objects of a kind into a typed slice.
func ListInto[T any](apiVersion, kind, namespace, labelSelector string) ([]T, error) {
	texts, err := list(apiVersion, kind, namespace, labelSelector)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(texts))
	for i, text := range texts {
		ev := kubewasm.NewEvent(kubewasm.Resync, "", text, "")
		if err := ev.Object(&out[i]); err != nil {
			return nil, kubewasm.Permanentf("host.list %s: %v", kind, err)
		}
	}
	return out, nil
}

func hostError(op, kind, message string) error {
	return kubewasm.Retryablef("host.%s %s: %s", op, kind, message)
}
