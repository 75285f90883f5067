package main

import (
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

func sd(state string) map[string]any {
	v := map[string]any{
		"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
		"metadata": map[string]any{"name": "iris", "namespace": "models", "uid": "u-3"},
		"spec": map[string]any{"predictors": []any{
			map[string]any{"name": "main", "graph": map[string]any{"name": "classifier"}, "replicas": 1}}},
	}
	if state != "" {
		v["status"] = map[string]any{"state": state}
	}
	return v
}

func TestModifiedIntoAvailableCreatesIngressAndAnnotation(t *testing.T) {
	kwtest.Reset()
	out, err := kubewasm.CallHandle(Endpoint{}, kwtest.Modified(WatchID, sd("Creating"), sd("Available")), "")
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, out, `[
		{"create": {"force": false, "ownedByTrigger": true, "object": {
			"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": {"name": "iris", "namespace": "models", "labels": {"app.kubernetes.io/managed-by": "kubewasm"}},
			"spec": {"rules": [{"host": "iris.models.example.com", "http": {"paths": [{
				"path": "/", "pathType": "Prefix",
				"backend": {"service": {"name": "iris-main", "port": {"number": 8000}}}}]}}]}}}},
		{"patch": {"force": false, "status": false, "strategy": "apply",
			"target": {"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment", "namespace": "models", "name": "iris"},
			"body": {"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
			         "metadata": {"name": "iris", "namespace": "models",
			                      "annotations": {"kubewasm.dev/public-url": "http://iris.models.example.com/"}}}}}
	]`)
	if logs := kwtest.TakeLogs(); len(logs) != 1 || logs[0].Message != "models/iris is Available: exposing http://iris.models.example.com/" {
		t.Errorf("logs: %v", logs)
	}
}

func TestTransitionRule(t *testing.T) {
	avail := sd("Available")
	for _, c := range []struct {
		what string
		ev   kubewasm.Event
		n    int
	}{
		{"added available", kwtest.Added(WatchID, avail), 2},
		{"resync available", kwtest.Resync(WatchID, avail), 2},
		{"added creating", kwtest.Added(WatchID, sd("Creating")), 0},
		{"added without status", kwtest.Added(WatchID, sd("")), 0},
		{"no status -> available", kwtest.Modified(WatchID, sd(""), avail), 2},
		{"failed -> available", kwtest.Modified(WatchID, sd("Failed"), avail), 2},
		{"available -> available", kwtest.Modified(WatchID, avail, avail), 0},
		{"available -> creating", kwtest.Modified(WatchID, avail, sd("Creating")), 0},
		{"creating -> creating", kwtest.Modified(WatchID, sd("Creating"), sd("Creating")), 0},
		{"modified without old", kubewasm.NewEvent(kubewasm.Modified, WatchID, kwtest.Added(WatchID, avail).Raw, ""), 2},
		{"deleted available", kwtest.Deleted(WatchID, avail), 0},
	} {
		out, err := kubewasm.CallHandle(Endpoint{}, c.ev, "")
		if err != nil || len(out) != c.n {
			t.Errorf("%s: %d intents, %v", c.what, len(out), err)
		}
	}
}

func TestLaterUnrelatedUpdatesWriteNothing(t *testing.T) {
	before, after := sd("Available"), sd("Available")
	meta := after["metadata"].(map[string]any)
	meta["annotations"] = map[string]any{URLAnnotation: "http://iris.models.example.com/"}
	meta["labels"] = map[string]any{"team": "ml"}
	if out, err := kubewasm.CallHandle(Endpoint{}, kwtest.Modified(WatchID, before, after), ""); err != nil || len(out) != 0 {
		t.Errorf("%v %v", out, err)
	}
}

func TestSettingsShapeTheIngress(t *testing.T) {
	obj := sd("Available")
	obj["spec"] = map[string]any{"predictors": []any{map[string]any{"graph": map[string]any{}}}}
	out, err := kubewasm.CallHandle(Endpoint{}, kwtest.Added(WatchID, obj),
		`{"domain": "ml.corp.dev", "ingressClassName": "nginx", "servicePort": 9000}`)
	if err != nil {
		t.Fatal(err)
	}
	got := kwtest.JSON(t, out)
	spec := got[0].(map[string]any)["create"].(map[string]any)["object"].(map[string]any)["spec"].(map[string]any)
	rule := spec["rules"].([]any)[0].(map[string]any)
	backend := rule["http"].(map[string]any)["paths"].([]any)[0].(map[string]any)["backend"].(map[string]any)
	if spec["ingressClassName"] != "nginx" || rule["host"] != "iris.models.ml.corp.dev" ||
		backend["service"].(map[string]any)["name"] != "iris-default" ||
		backend["service"].(map[string]any)["port"].(map[string]any)["number"] != 9000.0 {
		t.Errorf("ingress: %v", spec)
	}
	for _, bad := range []string{`{"domain": ""}`, `{"domain": ".corp"}`, `{"domian": "x"}`} {
		if _, err := kubewasm.CallDescribe(Endpoint{}, bad); err == nil {
			t.Errorf("%s is accepted", bad)
		}
	}
}

func TestBeingDeletedOrMalformed(t *testing.T) {
	going := sd("Available")
	going["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	if out, err := kubewasm.CallHandle(Endpoint{}, kwtest.Added(WatchID, going), ""); err != nil || len(out) != 0 {
		t.Errorf("being deleted: %v %v", out, err)
	}
	noNS := sd("Available")
	delete(noNS["metadata"].(map[string]any), "namespace")
	for what, ev := range map[string]kubewasm.Event{
		"a list":        kubewasm.NewEvent(kubewasm.Added, WatchID, "[]", ""),
		"no apiVersion": kwtest.Added(WatchID, map[string]any{"kind": "SeldonDeployment"}),
		"no namespace":  kwtest.Added(WatchID, noNS),
		"bad old":       kubewasm.NewEvent(kubewasm.Modified, WatchID, kwtest.Added(WatchID, sd("Available")).Raw, "{bad"),
		"bad state":     kwtest.Added(WatchID, map[string]any{"apiVersion": "v", "kind": "K", "metadata": map[string]any{"name": "n"}, "status": map[string]any{"state": 1}}),
	} {
		if _, err := kubewasm.CallHandle(Endpoint{}, ev, ""); !kubewasm.IsPermanent(err) {
			t.Errorf("%s: %v", what, err)
		}
	}
	_, err := kubewasm.CallHandle(Endpoint{}, kwtest.Added(WatchID, map[string]any{"kind": "SeldonDeployment"}), "")
	if !strings.Contains(err.Error(), "missing field `apiVersion`") {
		t.Errorf("message: %v", err)
	}
}

func TestGrantsCoverExactlyWhatItWrites(t *testing.T) {
	m, err := kubewasm.CallDescribe(Endpoint{}, "")
	if err != nil || m.Name != Name || m.Watches[0].Resource != kubewasm.ResourceArg(Resource) {
		t.Fatalf("%+v %v", m, err)
	}
	if len(m.Grants) != 2 || m.Grants[0].Verbs[0] != kubewasm.VerbCreate || m.Grants[1].Verbs[0] != kubewasm.VerbPatch {
		t.Errorf("grants: %+v", m.Grants)
	}
	out, _ := kubewasm.CallHandle(Endpoint{}, kwtest.Added(WatchID, sd("Available")), "")
	for _, in := range out {
		if err := m.Permits(in); err != nil {
			t.Error(err)
		}
	}
	scoped, _ := kubewasm.CallDescribe(Endpoint{}, `{"namespace": "elsewhere"}`)
	if scoped.Watches[0].Namespace != "elsewhere" {
		t.Errorf("scoped watch: %+v", scoped.Watches)
	}
	for _, in := range out {
		if scoped.Permits(in) == nil {
			t.Errorf("a scoped grant allows writes in another namespace")
		}
	}
}
