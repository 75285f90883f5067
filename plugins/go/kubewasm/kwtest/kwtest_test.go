package kwtest_test

import (
	"fmt"
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

// recorder is a testing.TB that keeps failures instead of reporting them.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

func TestAssertIntentsReportsPaths(t *testing.T) {
	intents := []kubewasm.Intent{kubewasm.Create(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "labels": map[string]any{"a": "b"}}, "data": map[string]any{"n": 1}})}
	r := &recorder{TB: t}
	kwtest.AssertIntents(r, intents, `[{"create": {"force": false, "ownedByTrigger": false,
		"object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "<any>", "labels": {"a": "b"}}, "data": {"n": 1}}}}]`)
	if len(r.failures) != 0 {
		t.Errorf("equal intents fail: %v", r.failures)
	}
	kwtest.AssertIntents(r, intents, `[{"create": {"force": true, "ownedByTrigger": false,
		"object": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}, "data": {"n": "1"}, "extra": 1}}}]`)
	if len(r.failures) != 1 {
		t.Fatalf("failures: %v", r.failures)
	}
	for _, want := range []string{
		"intents[0].create.force: want true, got false",
		"intents[0].create.object.kind: want \"Secret\", got \"ConfigMap\"",
		"intents[0].create.object.data.n: want \"1\", got 1",
		"intents[0].create.object.extra: missing",
		"intents[0].create.object.metadata.labels: unexpected",
	} {
		if !strings.Contains(r.failures[0], want) {
			t.Errorf("report lacks %q:\n%s", want, r.failures[0])
		}
	}
	r.failures = nil
	kwtest.AssertIntents(r, nil, `[{}]`)
	if len(r.failures) != 1 || !strings.Contains(r.failures[0], "want 1 items, got 0") {
		t.Errorf("count: %v", r.failures)
	}
}

func TestEventsAndObjects(t *testing.T) {
	ev := kwtest.Modified("w", `{"a": 1}`, map[string]any{"a": 2})
	if ev.Raw != `{"a":2}` || *ev.OldRaw != `{"a": 1}` || ev.Type != kubewasm.Modified {
		t.Errorf("Modified: %+v", ev)
	}
	if kwtest.Deleted("w", "{}").Type != kubewasm.Deleted || kwtest.Resync("w", "{}").Type != kubewasm.Resync {
		t.Errorf("constructors")
	}
	r := &recorder{TB: t}
	kwtest.SetObjects(r, map[string]any{"kind": "X"})
	if len(r.failures) != 1 {
		t.Errorf("an object without apiVersion and name is accepted")
	}
}
