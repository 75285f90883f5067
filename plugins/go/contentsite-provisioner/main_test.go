package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

func site() map[string]any {
	return map[string]any{
		"apiVersion": SiteAPIVersion, "kind": SiteKind,
		"metadata": map[string]any{"name": "blog", "namespace": "shop", "uid": "u-1", "generation": 2, "resourceVersion": "41"},
		"spec":     map[string]any{"domain": "blog.example.com", "database": map[string]any{"members": 5, "version": "6.0.5"}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Provisioned", "status": "True", "reason": "ChildrenRequested", "message": "old",
			"lastTransitionTime": "2026-01-02T03:04:05Z"}}},
	}
}

// The first conformance case (plugins/conformance/contentsite-provisioner/cases.yaml).
func TestAddedSiteGetsDatabaseServiceAndStatus(t *testing.T) {
	kwtest.Reset()
	out, err := kubewasm.CallHandle(Provisioner{}, kwtest.Added(WatchID, site()), "{}")
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, out, `[
		{"create": {"force": false, "ownedByTrigger": true, "object": {
			"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
			"metadata": {"name": "blog-db", "namespace": "shop",
			             "labels": {"app.kubernetes.io/managed-by": "kubewasm", "app.kubernetes.io/part-of": "blog"}},
			"spec": {"members": 5, "type": "ReplicaSet", "version": "6.0.5", "credentials": "mongodb-credentials",
			         "opsManager": {"configMapRef": {"name": "mongodb-project"}}}}}},
		{"create": {"force": false, "ownedByTrigger": true, "object": {
			"apiVersion": "v1", "kind": "Service",
			"metadata": {"name": "blog", "namespace": "shop", "labels": {"app": "blog", "app.kubernetes.io/managed-by": "kubewasm"}},
			"spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}], "selector": {"app": "blog"}}}}},
		{"patch": {"force": false, "status": true, "strategy": "apply",
			"target": {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite", "name": "blog", "namespace": "shop"},
			"body": {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
			         "metadata": {"name": "blog", "namespace": "shop"},
			         "status": {"databaseRef": "blog-db", "serviceRef": "blog", "observedGeneration": 2,
			                    "conditions": [{"type": "Provisioned", "status": "True", "reason": "ChildrenRequested",
			                                    "message": "MongoDB blog-db and Service blog requested",
			                                    "observedGeneration": 2, "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}}}
	]`)
	if logs := kwtest.TakeLogs(); len(logs) != 1 || logs[0].String() != "info: provisioning shop/blog: MongoDB blog-db, Service blog" {
		t.Errorf("logs: %v", logs)
	}
}

func TestSettingsProvideDefaults(t *testing.T) {
	s := site()
	s["spec"] = map[string]any{"title": "no database section"}
	delete(s, "status")
	out, err := kubewasm.CallHandle(Provisioner{}, kwtest.Added(WatchID, s),
		`{"database": {"members": 7, "version": "6.0.5", "credentials": "om-key", "projectConfigMap": "shop",
		  "manager": "cloudManager"}, "service": {"port": 8080, "targetPort": 3000}}`)
	if err != nil {
		t.Fatal(err)
	}
	got := kwtest.JSON(t, out)
	obj := func(i int) map[string]any {
		return got[i].(map[string]any)["create"].(map[string]any)["object"].(map[string]any)
	}
	spec := obj(0)["spec"].(map[string]any)
	if spec["type"] != "ReplicaSet" || spec["members"] != 7.0 || spec["version"] != "6.0.5" || spec["credentials"] != "om-key" ||
		spec["cloudManager"].(map[string]any)["configMapRef"].(map[string]any)["name"] != "shop" || spec["opsManager"] != nil {
		t.Errorf("database spec: %v", spec)
	}
	port := obj(1)["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)
	if port["port"] != 8080.0 || port["targetPort"] != 3000.0 {
		t.Errorf("port: %v", port)
	}
	cond := got[2].(map[string]any)["patch"].(map[string]any)["body"].(map[string]any)["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(cond["lastTransitionTime"].(string)) {
		t.Errorf("a new condition gets the current time: %v", cond)
	}
	for _, bad := range []string{`{"datbase": {}}`, `{"database": {"member": 1}}`, `{"service": {"port": "80"}}`,
		`{"database": {"manager": "atlas"}}`, `{"database": {"manager": 1}}`} {
		if _, err := kubewasm.CallDescribe(Provisioner{}, bad); err == nil {
			t.Errorf("%s is accepted", bad)
		}
	}
}

func TestModifiedAndResyncConvergeTheSameWay(t *testing.T) {
	s := site()
	s["spec"].(map[string]any)["database"] = map[string]any{"members": 7, "type": "ShardedCluster"}
	mod, err := kubewasm.CallHandle(Provisioner{}, kwtest.Modified(WatchID, site(), s), "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := kubewasm.CallHandle(Provisioner{}, kwtest.Resync(WatchID, s), "")
	if err != nil {
		t.Fatal(err)
	}
	a, b := kwtest.JSON(t, mod), kwtest.JSON(t, res)
	db := a[0].(map[string]any)["create"].(map[string]any)["object"].(map[string]any)["spec"].(map[string]any)
	if db["members"] != 7.0 || db["type"] != "ShardedCluster" || db["version"] != "7.0.12" || db["credentials"] != "mongodb-credentials" {
		t.Errorf("modified database: %v", db)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if len(b) != 3 || string(ja) != string(jb) {
		t.Errorf("resync differs from modified")
	}
}

func TestDeletedAndDeletingSitesNeedNoIntents(t *testing.T) {
	if out, err := kubewasm.CallHandle(Provisioner{}, kwtest.Deleted(WatchID, site()), ""); err != nil || len(out) != 0 {
		t.Errorf("deleted: %v %v", out, err)
	}
	s := site()
	s["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-02T03:04:05Z"
	kwtest.Reset()
	if out, err := kubewasm.CallHandle(Provisioner{}, kwtest.Modified(WatchID, site(), s), ""); err != nil || len(out) != 0 {
		t.Errorf("being deleted: %v %v", out, err)
	}
	if logs := kwtest.TakeLogs(); len(logs) != 1 || logs[0].String() != "debug: blog is being deleted; nothing to do" {
		t.Errorf("logs: %v", logs)
	}
}

func TestMalformedSitesArePermanentErrors(t *testing.T) {
	with := func(f func(map[string]any)) map[string]any { s := site(); f(s); return s }
	for what, c := range map[string]struct {
		ev   kubewasm.Event
		want string
	}{
		"not json":      {kubewasm.NewEvent(kubewasm.Added, WatchID, "{oops", ""), "object is not valid JSON"},
		"no name":       {kwtest.Added(WatchID, with(func(s map[string]any) { delete(s["metadata"].(map[string]any), "name") })), "object has no metadata.name"},
		"no namespace":  {kwtest.Added(WatchID, with(func(s map[string]any) { delete(s["metadata"].(map[string]any), "namespace") })), "ContentSite has no metadata.namespace"},
		"other kind":    {kwtest.Added(WatchID, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "shop"}}), "expected a sites.kubewasm.dev/v1alpha1 ContentSite, got v1 ConfigMap"},
		"members text":  {kwtest.Added(WatchID, with(func(s map[string]any) { s["spec"].(map[string]any)["database"] = map[string]any{"members": "three"} })), "invalid spec.database: "},
		"database text": {kwtest.Added(WatchID, with(func(s map[string]any) { s["spec"].(map[string]any)["database"] = "big" })), "invalid spec.database: "},
		"zero members":  {kwtest.Added(WatchID, with(func(s map[string]any) { s["spec"].(map[string]any)["database"] = map[string]any{"members": 0} })), "spec.database.members must be at least 1"},
		"negative":      {kwtest.Added(WatchID, with(func(s map[string]any) { s["spec"].(map[string]any)["database"] = map[string]any{"members": -1} })), "invalid spec.database: "},
	} {
		_, err := kubewasm.CallHandle(Provisioner{}, c.ev, "")
		if !kubewasm.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", what, err)
		}
	}
	// A null database section, or a spec that is not an object, means the defaults.
	for _, s := range []map[string]any{
		with(func(s map[string]any) { s["spec"].(map[string]any)["database"] = nil }),
		with(func(s map[string]any) { s["spec"] = "odd" }),
	} {
		if out, err := kubewasm.CallHandle(Provisioner{}, kwtest.Added(WatchID, s), ""); err != nil || len(out) != 3 {
			t.Errorf("defaults: %v", err)
		}
	}
}

func TestGrantsCoverExactlyWhatItWrites(t *testing.T) {
	m, err := kubewasm.CallDescribe(Provisioner{}, "")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := kubewasm.CallHandle(Provisioner{}, kwtest.Added(WatchID, site()), "")
	for _, in := range out {
		if err := m.Permits(in); err != nil {
			t.Error(err)
		}
	}
	scoped, _ := kubewasm.CallDescribe(Provisioner{}, `{"namespace": "elsewhere"}`)
	if scoped.Watches[0].Namespace != "elsewhere" {
		t.Errorf("scoped watch: %+v", scoped.Watches)
	}
	for _, in := range out {
		if scoped.Permits(in) == nil {
			t.Errorf("a scoped grant allows writes in another namespace")
		}
	}
}
