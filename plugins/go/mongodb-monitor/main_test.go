package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

func db() map[string]any {
	return map[string]any{
		"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
		"metadata": map[string]any{"name": "orders", "namespace": "default", "uid": "u-1",
			"labels": map[string]any{"owner": "someone-else"}},
		"spec": map[string]any{"members": 3, "type": "ReplicaSet", "version": "7.0.12"},
	}
}

func TestAddedMongoDBGetsAServiceMonitor(t *testing.T) {
	kwtest.Reset()
	out, err := kubewasm.CallHandle(Monitor{}, kwtest.Added(WatchID, db()),
		`{"interval": "15s", "port": "metrics", "labels": {"release": "prometheus", "team": "data", "app": "overridden"}}`)
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, out, `[{"create": {"force": false, "ownedByTrigger": true, "object": {
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"metadata": {"name": "orders-monitor", "namespace": "default", "labels": {
			"app": "orders", "app.kubernetes.io/managed-by": "kubewasm", "release": "prometheus", "team": "data"}},
		"spec": {"selector": {"matchLabels": {"app": "orders"}},
		         "endpoints": [{"port": "metrics", "interval": "15s"}]}}}}]`)
	logs := kwtest.TakeLogs()
	if len(logs) != 1 || logs[0].String() != `info: monitoring MongoDB default/orders with ServiceMonitor "orders-monitor"` {
		t.Errorf("logs: %v", logs)
	}
}

func TestDefaultsModifiedAndResyncAgree(t *testing.T) {
	want := `[{"create": {"force": false, "ownedByTrigger": true, "object": {
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"metadata": {"name": "orders-monitor", "namespace": "default",
		             "labels": {"app": "orders", "app.kubernetes.io/managed-by": "kubewasm"}},
		"spec": {"selector": {"matchLabels": {"app": "orders"}}, "endpoints": [{"port": "metrics", "interval": "30s"}]}}}}]`
	for _, ev := range []kubewasm.Event{kwtest.Resync(WatchID, db()), kwtest.Modified(WatchID, db(), db())} {
		out, err := kubewasm.CallHandle(Monitor{}, ev, "")
		if err != nil {
			t.Fatal(err)
		}
		kwtest.AssertIntents(t, out, want)
	}
}

// TestTheProjectionIsEnough: what the host delivers under Fields (identity and
// metadata.deletionTimestamp) gives the same intents as the whole object.
func TestTheProjectionIsEnough(t *testing.T) {
	projected := map[string]any{"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
		"metadata": map[string]any{"name": "orders", "namespace": "default", "uid": "u-1"}}
	whole, err1 := kubewasm.CallHandle(Monitor{}, kwtest.Added(WatchID, db()), "")
	lean, err2 := kubewasm.CallHandle(Monitor{}, kwtest.Added(WatchID, projected), "")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	want, _ := json.Marshal(kwtest.JSON(t, whole))
	if len(whole) != 1 {
		t.Fatalf("whole: %s", want)
	}
	kwtest.AssertIntents(t, lean, string(want))
	projected["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	if out, err := kubewasm.CallHandle(Monitor{}, kwtest.Resync(WatchID, projected), ""); err != nil || len(out) != 0 {
		t.Errorf("deleting: %v %v", out, err)
	}
}

func TestDeletedAndDeletingNeedNothing(t *testing.T) {
	if out, err := kubewasm.CallHandle(Monitor{}, kwtest.Deleted(WatchID, db()), ""); err != nil || len(out) != 0 {
		t.Errorf("deleted: %v %v", out, err)
	}
	going := db()
	going["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	if out, err := kubewasm.CallHandle(Monitor{}, kwtest.Modified(WatchID, db(), going), ""); err != nil || len(out) != 0 {
		t.Errorf("being deleted: %v %v", out, err)
	}
}

func TestMalformedMongoDBsArePermanentErrors(t *testing.T) {
	noNS := db()
	delete(noNS["metadata"].(map[string]any), "namespace")
	noName := db()
	delete(noName["metadata"].(map[string]any), "name")
	for what, c := range map[string]struct {
		ev   kubewasm.Event
		want string
	}{
		"not json":     {kubewasm.NewEvent(kubewasm.Added, WatchID, "{oops", ""), "object is not valid JSON"},
		"other kind":   {kwtest.Added(WatchID, map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}), "expected a mongodb.com/v1 MongoDB, got v1 ConfigMap"},
		"no kind":      {kwtest.Added(WatchID, map[string]any{}), "expected a mongodb.com/v1 MongoDB, got ? ?"},
		"no namespace": {kwtest.Added(WatchID, noNS), "MongoDB has no metadata.namespace"},
		"no name":      {kwtest.Added(WatchID, noName), "object has no metadata.name"},
	} {
		_, err := kubewasm.CallHandle(Monitor{}, c.ev, "")
		if !kubewasm.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", what, err)
		}
	}
}

func TestSettingsAreValidated(t *testing.T) {
	for _, bad := range []string{`{"interval": "30"}`, `{"interval": "1s1m"}`, `{"interval": ""}`,
		`{"port": ""}`, `{"intervall": "30s"}`, `{"labels": {"a": 1}}`} {
		if _, err := kubewasm.CallDescribe(Monitor{}, bad); err == nil {
			t.Errorf("%s is accepted", bad)
		}
	}
	for s, ok := range map[string]bool{"0": true, "30s": true, "1m30s": true, "1h": true, "2w1d": true,
		"100ms": true, "1m100ms": true, "1y2w3d4h5m6s7ms": true, "": false, "s": false, "5": false,
		"1ms1s": false, "1s1s": false, "1x": false, "-1s": false} {
		if IsPrometheusDuration(s) != ok {
			t.Errorf("IsPrometheusDuration(%q) != %v", s, ok)
		}
	}
}

func TestGrantsCoverExactlyWhatItWrites(t *testing.T) {
	m, err := kubewasm.CallDescribe(Monitor{}, "")
	if err != nil || m.Name != Name || m.Watches[0].Resource != kubewasm.KindRef("mongodb.com/v1", "MongoDB") {
		t.Fatalf("describe: %+v %v", m, err)
	}
	if !slices.Equal(m.Watches[0].Fields, []string{"metadata.deletionTimestamp"}) {
		t.Errorf("fields: %v", m.Watches[0].Fields)
	}
	out, _ := kubewasm.CallHandle(Monitor{}, kwtest.Added(WatchID, db()), "")
	for _, in := range out {
		if err := m.Permits(in); err != nil {
			t.Error(err)
		}
	}
	scoped, _ := kubewasm.CallDescribe(Monitor{}, `{"namespace": "databases"}`)
	if scoped.Watches[0].Namespace != "databases" || scoped.Permits(out[0]) == nil {
		t.Errorf("namespace setting: %+v", scoped)
	}
}
