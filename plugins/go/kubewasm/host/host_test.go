package host_test

import (
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/host"
	"kubewasm.dev/kubewasm/kwtest"
)

func cm(ns, name string, labels map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"data":     map[string]any{"k": name}}
}

type ConfigMap struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func TestGetAndList(t *testing.T) {
	kwtest.Reset()
	kwtest.SetObjects(t,
		cm("web", "a", map[string]any{"app": "web", "tier": "front"}),
		cm("web", "b", map[string]any{"app": "web", "tier": "back"}),
		cm("db", "c", map[string]any{"app": "db"}),
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web"}},
	)
	obj, found, err := host.Get("v1", "ConfigMap", "web", "b")
	if err != nil || !found || obj.GetName() != "b" {
		t.Fatalf("Get: %v %v %v", obj, found, err)
	}
	if _, found, err := host.Get("v1", "ConfigMap", "db", "b"); found || err != nil {
		t.Errorf("Get in another namespace: %v %v", found, err)
	}
	if _, found, _ := host.Get("v1", "Namespace", "", "web"); !found {
		t.Errorf("cluster-scoped Get")
	}
	var typed ConfigMap
	if found, err := host.GetInto("v1", "ConfigMap", "db", "c", &typed); !found || err != nil || typed.Data["k"] != "c" {
		t.Errorf("GetInto: %+v %v", typed, err)
	}
	names := func(objs []kubewasm.Unstructured) string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return strings.Join(out, ",")
	}
	for selector, want := range map[string]string{
		"":                        "a,b,c",
		"app=web":                 "a,b",
		"app==web,tier!=back":     "a",
		"tier":                    "a,b",
		"!tier":                   "c",
		"tier in (front, middle)": "a",
		"app notin (web)":         "c",
	} {
		objs, err := host.List("v1", "ConfigMap", "", selector)
		if err != nil || names(objs) != want {
			t.Errorf("List(%q) = %s, %v; want %s", selector, names(objs), err, want)
		}
	}
	if objs, _ := host.List("v1", "ConfigMap", "web", ""); names(objs) != "a,b" {
		t.Errorf("List in a namespace: %s", names(objs))
	}
	list, err := host.ListInto[ConfigMap]("v1", "ConfigMap", "db", "")
	if err != nil || len(list) != 1 || list[0].Metadata.Name != "c" {
		t.Errorf("ListInto: %+v %v", list, err)
	}
	if _, err := host.List("v1", "ConfigMap", "", "a in b"); err == nil {
		t.Errorf("a bad selector is accepted")
	}
}

func TestHostErrorsAreRetryable(t *testing.T) {
	kwtest.Reset()
	kwtest.SetHostError("v1/Secret is not cached (is the resource served?)")
	_, _, err := host.Get("v1", "Secret", "web", "s")
	if err == nil || kubewasm.IsPermanent(err) || !strings.Contains(err.Error(), "host.get Secret: v1/Secret is not cached") {
		t.Errorf("Get: %v", err)
	}
	if _, err := host.List("v1", "Secret", "", ""); err == nil || kubewasm.IsPermanent(err) {
		t.Errorf("List: %v", err)
	}
	kwtest.Reset()
	kwtest.AllowOnly(kubewasm.NewManifest("p", "1").WatchKind("w", "v1", "ConfigMap").ReadKind("v1", "Service"))
	if _, err := host.List("v1", "Service", "", ""); err != nil {
		t.Errorf("a declared read is refused: %v", err)
	}
	if _, _, err := host.Get("v1", "Secret", "web", "s"); err == nil || !strings.Contains(err.Error(), "reads") {
		t.Errorf("an undeclared read is allowed: %v", err)
	}
}
