//go:build !wasip1

// Package fake is the native stand-in for the host's imports (log, get, list), driven by
// package kwtest.
package fake

import "sync"

// Entry is one log line.
type Entry struct {
	Level   uint8
	Message string
}

// Object is one object of the fake cluster, with the fields get/list match on.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	Labels                            map[string]string
	JSON                              string
}

var (
	mu      sync.Mutex
	logs    []Entry
	objects []Object
	// Err, when set, is what get and list return as the host's error.
	hostErr string
	// Allowed, when set, is the set of "apiVersion/kind" get/list may read.
	allowed map[string]bool
)

// Log records a line.
func Log(level uint8, message string) {
	mu.Lock()
	defer mu.Unlock()
	logs = append(logs, Entry{level, message})
}

// TakeLogs returns and clears the recorded lines.
func TakeLogs() []Entry {
	mu.Lock()
	defer mu.Unlock()
	out := logs
	logs = nil
	return out
}

// SetObjects replaces the fake cluster.
func SetObjects(objs []Object) {
	mu.Lock()
	defer mu.Unlock()
	objects = append([]Object(nil), objs...)
}

// SetHostError makes get and list fail with message ("" to stop).
func SetHostError(message string) {
	mu.Lock()
	defer mu.Unlock()
	hostErr = message
}

// SetAllowed restricts get and list to these "apiVersion/kind" keys (nil: everything).
func SetAllowed(keys []string) {
	mu.Lock()
	defer mu.Unlock()
	if keys == nil {
		allowed = nil
		return
	}
	allowed = map[string]bool{}
	for _, k := range keys {
		allowed[k] = true
	}
}

func check(apiVersion, kind string) (string, bool) {
	if hostErr != "" {
		return hostErr, false
	}
	if allowed != nil && !allowed[apiVersion+"/"+kind] {
		return apiVersion + "/" + kind + " is not watched or declared in `reads` by this plugin", false
	}
	return "", true
}

// Get is the fake host.get.
func Get(apiVersion, kind, namespace, name string) (string, bool, string) {
	mu.Lock()
	defer mu.Unlock()
	if msg, ok := check(apiVersion, kind); !ok {
		return "", false, msg
	}
	for _, o := range objects {
		if o.APIVersion == apiVersion && o.Kind == kind && o.Namespace == namespace && o.Name == name {
			return o.JSON, true, ""
		}
	}
	return "", false, ""
}

// List is the fake host.list; match decides the label selector.
func List(apiVersion, kind, namespace string, match func(map[string]string) bool) ([]string, string) {
	mu.Lock()
	defer mu.Unlock()
	if msg, ok := check(apiVersion, kind); !ok {
		return nil, msg
	}
	out := []string{}
	for _, o := range objects {
		if o.APIVersion != apiVersion || o.Kind != kind || (namespace != "" && o.Namespace != namespace) {
			continue
		}
		if match != nil && !match(o.Labels) {
			continue
		}
		out = append(out, o.JSON)
	}
	return out, ""
}

// Reset clears logs, objects, the host error and the allowed kinds.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	logs, objects, hostErr, allowed = nil, nil, "", nil
}
