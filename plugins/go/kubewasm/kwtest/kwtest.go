//go:build !wasip1

// Package kwtest is the fake host for native tests of kubewasm plugins, the way client-go's
// fake clientset is for controllers: a cluster that host.Get/host.List read, the lines
// kubewasm.Log wrote, and events built from Go values.
//
//	func TestAddedSite(t *testing.T) {
//		kwtest.Reset()
//		kwtest.SetObjects(t, existingService)
//		out, err := kubewasm.CallHandle(Provisioner{}, kwtest.Added("sites", site), `{"service": {"port": 8080}}`)
//		...
//		for _, l := range kwtest.TakeLogs() { t.Log(l) }
//	}
package kwtest

import (
	"encoding/json"
	"fmt"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/internal/fake"
)

// Reset empties the fake cluster and the log, and clears SetHostError and AllowOnly.
func Reset() { fake.Reset() }

// SetObjects replaces the fake cluster with objs (Unstructured, maps or structs with json
// tags; each needs apiVersion, kind and metadata.name).
func SetObjects(t testing.TB, objs ...any) {
	t.Helper()
	list := make([]fake.Object, 0, len(objs))
	for i, o := range objs {
		u, err := kubewasm.ToUnstructured(o)
		if err != nil {
			t.Fatalf("kwtest.SetObjects: object #%d: %v", i, err)
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("kwtest.SetObjects: object #%d needs apiVersion, kind and metadata.name", i)
		}
		text, _ := json.Marshal(u)
		list = append(list, fake.Object{
			APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(),
			Name: u.GetName(), Labels: u.GetLabels(), JSON: string(text),
		})
	}
	fake.SetObjects(list)
}

// SetHostError makes host.Get and host.List fail with message, as the host does for a cache
// that is not ready ("" to stop).
func SetHostError(message string) { fake.SetHostError(message) }

// AllowOnly makes host.Get and host.List refuse kinds the manifest neither watches nor
// declares in Reads, as the host does. Call it with the plugin's manifest.
func AllowOnly(m kubewasm.Manifest) {
	keys := []string{}
	for _, w := range m.Watches {
		if w.Resource.IsKind() {
			keys = append(keys, w.Resource.APIVersion+"/"+w.Resource.Kind)
		}
	}
	for _, r := range m.Reads {
		if r.Resource.IsKind() {
			keys = append(keys, r.Resource.APIVersion+"/"+r.Resource.Kind)
		}
	}
	fake.SetAllowed(keys)
}

// LogLine is one line written with kubewasm.Log.
type LogLine struct {
	Level   kubewasm.Level
	Message string
}

// String is "level: message".
func (l LogLine) String() string { return l.Level.String() + ": " + l.Message }

// TakeLogs returns the lines logged since the last call (or Reset) and forgets them.
func TakeLogs() []LogLine {
	var out []LogLine
	for _, e := range fake.TakeLogs() {
		out = append(out, LogLine{kubewasm.Level(e.Level), e.Message})
	}
	return out
}

func mustJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kwtest: cannot encode %T: %v", v, err))
	}
	return string(data)
}

// Added is an Added event for obj (a value encoding/json encodes, or JSON text).
func Added(watchID string, obj any) kubewasm.Event {
	return kubewasm.NewEvent(kubewasm.Added, watchID, mustJSON(obj), "")
}

// Modified is a Modified event from old to obj.
func Modified(watchID string, old, obj any) kubewasm.Event {
	return kubewasm.NewEvent(kubewasm.Modified, watchID, mustJSON(obj), mustJSON(old))
}

// Deleted is a Deleted event for obj (its last known state).
func Deleted(watchID string, obj any) kubewasm.Event {
	return kubewasm.NewEvent(kubewasm.Deleted, watchID, mustJSON(obj), "")
}

// Resync is a Resync event for obj.
func Resync(watchID string, obj any) kubewasm.Event {
	return kubewasm.NewEvent(kubewasm.Resync, watchID, mustJSON(obj), "")
}

// JSON is the test-case shape of intents (what `kubewasm test` compares), re-encoded through
// JSON so numbers are plain float64/int64 values; it fails t on an intent that cannot be
// encoded.
func JSON(t testing.TB, intents []kubewasm.Intent) []any {
	t.Helper()
	out, err := kubewasm.IntentsJSON(intents)
	if err != nil {
		t.Fatalf("kwtest.JSON: %v", err)
	}
	data, _ := json.Marshal(out)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("kwtest.JSON: %v", err)
	}
	return v.([]any)
}

// AssertIntents fails t unless intents equal want, JSON text in the test-case shape
// (`[{"create": {"object": {...}, "ownedByTrigger": true, "force": false}}, ...]`), compared
// as JSON values. Differences are reported path by path.
func AssertIntents(t testing.TB, intents []kubewasm.Intent, want string) {
	t.Helper()
	got := JSON(t, intents)
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("kwtest.AssertIntents: want is not JSON: %v", err)
	}
	var diffs []string
	diff("intents", w, any(got), &diffs)
	if len(diffs) > 0 {
		pretty, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("intents differ:\n  %s\ngot:\n%s", joinLines(diffs), pretty)
	}
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

func diff(path string, want, got any, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want an object, got %s", path, short(got)))
			return
		}
		for k, wv := range w {
			gv, has := g[k]
			if !has {
				*out = append(*out, fmt.Sprintf("%s.%s: missing (want %s)", path, k, short(wv)))
				continue
			}
			diff(path+"."+k, wv, gv, out)
		}
		for k, gv := range g {
			if _, has := w[k]; !has {
				*out = append(*out, fmt.Sprintf("%s.%s: unexpected %s", path, k, short(gv)))
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want a list, got %s", path, short(got)))
			return
		}
		if len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: want %d items, got %d", path, len(w), len(g)))
		}
		for i := 0; i < len(w) && i < len(g); i++ {
			diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
		}
	default:
		if s, isStr := want.(string); isStr && s == "<any>" {
			return
		}
		if fmt.Sprintf("%T:%v", want, want) != fmt.Sprintf("%T:%v", got, got) {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, short(want), short(got)))
		}
	}
}

func short(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(data) > 120 {
		return string(data[:117]) + "..."
	}
	return string(data)
}
