package kubewasm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

func TestParseUnstructuredKeepsIntegersExact(t *testing.T) {
	u, err := kubewasm.ParseUnstructured([]byte(`{"a": 1, "b": 9223372036854775807, "c": 18446744073709551615,
		"d": 1.5, "e": 1e3, "f": [1, {"g": 2}], "h": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if u["a"] != int64(1) || u["b"] != int64(math.MaxInt64) || u["c"] != uint64(math.MaxUint64) {
		t.Errorf("integers: %#v %#v %#v", u["a"], u["b"], u["c"])
	}
	if u["d"] != 1.5 || u["e"] != 1000.0 {
		t.Errorf("floats: %#v %#v", u["d"], u["e"])
	}
	if g, _, _ := kubewasm.NestedInt64(u["f"].([]any)[1].(map[string]any), "g"); g != 2 {
		t.Errorf("nested: %v", g)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{`, `{} {}`, `{}x`, ``} {
		if _, err := kubewasm.ParseUnstructured([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	out, _ := json.Marshal(u)
	if !strings.Contains(string(out), `"c":18446744073709551615`) {
		t.Errorf("re-encoded: %s", out)
	}
}

func site() kubewasm.Unstructured {
	return kubewasm.Unstructured{
		"apiVersion": "sites.kubewasm.dev/v1alpha1",
		"kind":       "ContentSite",
		"metadata": map[string]any{
			"name": "blog", "namespace": "web", "uid": "u-1", "resourceVersion": "7", "generation": int64(2),
			"labels":      map[string]any{"app": "blog", "n": int64(1)},
			"annotations": map[string]any{"a": "b"},
		},
		"spec": map[string]any{"title": "Blog", "replicas": int64(3), "ratio": 0.5, "on": true,
			"tags": []any{"x", "y"}, "database": map[string]any{"members": int64(1)}},
	}
}

func TestUnstructuredAccessors(t *testing.T) {
	u := site()
	if u.GetAPIVersion() != "sites.kubewasm.dev/v1alpha1" || u.GetKind() != "ContentSite" ||
		u.GetName() != "blog" || u.GetNamespace() != "web" || u.GetUID() != "u-1" ||
		u.GetResourceVersion() != "7" || u.GetGeneration() != 2 {
		t.Errorf("accessors: %v", u)
	}
	if l, ok := u.GetLabel("app"); !ok || l != "blog" {
		t.Errorf("label: %q %v", l, ok)
	}
	if _, ok := u.GetLabel("n"); ok {
		t.Errorf("a non-string label reads as a label")
	}
	if a, _ := u.GetAnnotation("a"); a != "b" || u.GetAnnotations()["a"] != "b" {
		t.Errorf("annotations")
	}
	if u.GetLabels() != nil {
		t.Errorf("labels with a non-string value: %v", u.GetLabels())
	}
	if u.IsBeingDeleted() {
		t.Errorf("not being deleted")
	}
	_ = kubewasm.SetNestedField(u, nil, "metadata", "deletionTimestamp")
	if u.IsBeingDeleted() {
		t.Errorf("a null deletionTimestamp is not a deletion")
	}
	_ = kubewasm.SetNestedField(u, "2026-01-01T00:00:00Z", "metadata", "deletionTimestamp")
	if !u.IsBeingDeleted() || u.GetDeletionTimestamp() == "" {
		t.Errorf("being deleted")
	}
	if _, err := (kubewasm.Unstructured{}).RequireName(); !kubewasm.IsPermanent(err) {
		t.Errorf("RequireName on {}: %v", err)
	}
	var empty kubewasm.Unstructured
	if empty.GetName() != "" || empty.IsBeingDeleted() {
		t.Errorf("nil Unstructured")
	}
}

func TestNestedHelpers(t *testing.T) {
	u := site()
	if s, ok, err := kubewasm.NestedString(u, "spec", "title"); s != "Blog" || !ok || err != nil {
		t.Errorf("NestedString: %q %v %v", s, ok, err)
	}
	if _, ok, err := kubewasm.NestedString(u, "spec", "missing"); ok || err != nil {
		t.Errorf("missing: %v %v", ok, err)
	}
	if _, _, err := kubewasm.NestedString(u, "spec", "replicas"); err == nil {
		t.Errorf("a number read as a string")
	}
	if _, _, err := kubewasm.NestedString(u, "spec", "title", "deeper"); err == nil {
		t.Errorf("a string walked into")
	}
	if n, ok, _ := kubewasm.NestedInt64(u, "spec", "replicas"); n != 3 || !ok {
		t.Errorf("NestedInt64: %v", n)
	}
	if _, _, err := kubewasm.NestedInt64(u, "spec", "ratio"); err == nil {
		t.Errorf("a float read as an int")
	}
	if f, _, _ := kubewasm.NestedFloat64(u, "spec", "ratio"); f != 0.5 {
		t.Errorf("NestedFloat64: %v", f)
	}
	if b, _, _ := kubewasm.NestedBool(u, "spec", "on"); !b {
		t.Errorf("NestedBool")
	}
	if ss, _, _ := kubewasm.NestedStringSlice(u, "spec", "tags"); fmt.Sprint(ss) != "[x y]" {
		t.Errorf("NestedStringSlice: %v", ss)
	}
	m, _, _ := kubewasm.NestedMap(u, "spec", "database")
	m["members"] = int64(9)
	if n, _, _ := kubewasm.NestedInt64(u, "spec", "database", "members"); n != 1 {
		t.Errorf("NestedMap did not copy")
	}
	s, _, _ := kubewasm.NestedSlice(u, "spec", "tags")
	s[0] = "changed"
	if ss, _, _ := kubewasm.NestedStringSlice(u, "spec", "tags"); ss[0] != "x" {
		t.Errorf("NestedSlice did not copy")
	}
	if err := kubewasm.SetNestedField(u, "v", "status", "new", "field"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := kubewasm.NestedString(u, "status", "new", "field"); v != "v" {
		t.Errorf("SetNestedField: %v", u["status"])
	}
	if err := kubewasm.SetNestedField(u, "v", "spec", "title", "x"); err == nil {
		t.Errorf("set through a string")
	}
	kubewasm.RemoveNestedField(u, "status", "new")
	if _, ok, _ := kubewasm.NestedFieldNoCopy(u, "status", "new"); ok {
		t.Errorf("RemoveNestedField")
	}
	// Nested Unstructured values (built by hand) are objects too.
	built := kubewasm.Unstructured{"spec": kubewasm.Unstructured{"x": "y"}}
	if v, _, err := kubewasm.NestedString(built, "spec", "x"); v != "y" || err != nil {
		t.Errorf("nested Unstructured: %v %v", v, err)
	}
	c := u.DeepCopy()
	_ = kubewasm.SetNestedField(c, "other", "metadata", "name")
	if u.GetName() != "blog" {
		t.Errorf("DeepCopy shares data")
	}
}

type Site struct {
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Title    string `json:"title"`
		Replicas int    `json:"replicas"`
	} `json:"spec"`
}

func TestEventDecoding(t *testing.T) {
	old := site()
	_ = kubewasm.SetNestedField(old, "Old", "spec", "title")
	ev := kwtest.Modified("sites", old, site())
	if !ev.IsModified() || ev.IsAdded() || ev.WatchID != "sites" || !ev.HasOldObject() {
		t.Errorf("event: %+v", ev)
	}
	var s Site
	if err := ev.Object(&s); err != nil || s.Spec.Title != "Blog" || s.Spec.Replicas != 3 || s.Metadata.Name != "blog" {
		t.Errorf("Object: %+v %v", s, err)
	}
	var before Site
	if found, err := ev.OldObject(&before); !found || err != nil || before.Spec.Title != "Old" {
		t.Errorf("OldObject: %+v %v %v", before, found, err)
	}
	u, err := ev.Unstructured()
	if err != nil || u.GetName() != "blog" {
		t.Errorf("Unstructured: %v", err)
	}
	var viaObject kubewasm.Unstructured
	if err := ev.Object(&viaObject); err != nil || viaObject.GetGeneration() != 2 {
		t.Errorf("Object(&Unstructured): %v", err)
	}
	if _, found, err := kwtest.Added("sites", site()).OldUnstructured(); found || err != nil {
		t.Errorf("no old object: %v %v", found, err)
	}

	for _, raw := range []string{"{oops", "[1,2]", `"str"`} {
		_, err := kubewasm.NewEvent(kubewasm.Added, "w", raw, "").Unstructured()
		if !kubewasm.IsPermanent(err) {
			t.Errorf("%q: %v", raw, err)
		}
	}
	err = kubewasm.NewEvent(kubewasm.Added, "w", `{"spec": {"title": 5}}`, "").Object(&s)
	if !kubewasm.IsPermanent(err) || !strings.Contains(err.Error(), "Site") {
		t.Errorf("typed decode error: %v", err)
	}
	_, err = kubewasm.NewEvent(kubewasm.Modified, "w", "{}", "{bad").OldObject(&s)
	if !kubewasm.IsPermanent(err) || !strings.HasPrefix(err.Error(), "old object") {
		t.Errorf("old object error: %v", err)
	}
}

func TestIntentBuildersAndShapes(t *testing.T) {
	ref := kubewasm.Namespaced("v1", "ConfigMap", "web", "old")
	intents := []kubewasm.Intent{
		kubewasm.Create(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": "web"}}).OwnedByTrigger(),
		kubewasm.Create(struct {
			APIVersion string         `json:"apiVersion"`
			Kind       string         `json:"kind"`
			Metadata   map[string]any `json:"metadata"`
		}{"v1", "Secret", map[string]any{"name": "s"}}).Force(),
		kubewasm.Patch(ref, map[string]any{"status": map[string]any{"ok": true}}).Status(),
		kubewasm.MergePatch(kubewasm.ClusterScoped("v1", "Namespace", "web"), map[string]any{"metadata": map[string]any{}}),
		kubewasm.Delete(ref).UID("u").ResourceVersion("9").Propagation(kubewasm.Foreground),
		kubewasm.Delete(ref),
	}
	kwtest.AssertIntents(t, intents, `[
		{"create": {"object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "web"}},
		            "force": false, "ownedByTrigger": true}},
		{"create": {"object": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}},
		            "force": true, "ownedByTrigger": false}},
		{"patch": {"target": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "name": "old"},
		           "body": {"status": {"ok": true}}, "strategy": "apply", "status": true, "force": false}},
		{"patch": {"target": {"apiVersion": "v1", "kind": "Namespace", "name": "web"},
		           "body": {"metadata": {}}, "strategy": "merge", "status": false, "force": false}},
		{"delete": {"target": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "name": "old"},
		            "uid": "u", "resourceVersion": "9", "propagation": "Foreground"}},
		{"delete": {"target": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "name": "old"}}}
	]`)
	verbs := []kubewasm.Verb{}
	for _, in := range intents {
		verbs = append(verbs, in.Verb())
	}
	if fmt.Sprint(verbs) != "[create create patch-status patch delete delete]" {
		t.Errorf("verbs: %v", verbs)
	}
	if target, err := intents[0].Target(); err != nil || target != kubewasm.Namespaced("v1", "ConfigMap", "web", "c") {
		t.Errorf("create target: %v %v", target, err)
	}
	if !intents[1].Forced() || intents[0].Forced() {
		t.Errorf("forced")
	}
	bad := []kubewasm.Intent{kubewasm.Create(map[string]any{"ch": make(chan int)})}
	if _, err := kubewasm.IntentsJSON(bad); !kubewasm.IsPermanent(err) {
		t.Errorf("unencodable object: %v", err)
	}
	if _, err := kubewasm.Delete(ref).Propagation("Sideways").JSON(); !kubewasm.IsPermanent(err) {
		t.Errorf("an unknown propagation: %v", err)
	}
	if _, err := kubewasm.Create([]int{1}).JSON(); !kubewasm.IsPermanent(err) {
		t.Errorf("a list as an object: %v", err)
	}
	if _, err := kubewasm.Create(map[string]any{"kind": "X"}).Target(); err == nil {
		t.Errorf("a target without apiVersion")
	}
	if r, err := kubewasm.RefOf(site()); err != nil || r.String() != "sites.kubewasm.dev/v1alpha1 ContentSite web/blog" || r.Group() != "sites.kubewasm.dev" {
		t.Errorf("RefOf: %v %v", r, err)
	}
	if kubewasm.GroupOf("v1") != "" || kubewasm.GroupOf("apps/v1") != "apps" {
		t.Errorf("GroupOf")
	}
}

func TestManifestValidateAndPermits(t *testing.T) {
	base := kubewasm.NewManifest("p", "1").WatchKind("x", "v1", "ConfigMap")
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]kubewasm.Manifest{
		"bad name":    kubewasm.NewManifest("a_b", "1").WatchKind("x", "v1", "C"),
		"long name":   kubewasm.NewManifest(strings.Repeat("a", 64), "1").WatchKind("x", "v1", "C"),
		"no watches":  kubewasm.NewManifest("a", "1"),
		"duplicate":   base.WatchResource("x", "pods"),
		"empty id":    base.WatchKind("", "v1", "Secret"),
		"no resource": base.Watch(kubewasm.Watch{ID: "y"}),
	} {
		if err := m.Validate(); err == nil {
			t.Errorf("%s: validates", name)
		}
	}
	// Builders never share backing arrays between branches.
	a := base.Grant(kubewasm.GrantOn("", "Service").Create())
	b := base.Grant(kubewasm.GrantOn("", "Secret").Delete())
	if a.Grants[0].Kinds[0] != "Service" || b.Grants[0].Kinds[0] != "Secret" || len(base.Grants) != 0 {
		t.Errorf("builders alias: %v %v", a.Grants, b.Grants)
	}

	m := kubewasm.NewManifest("p", "1").
		Watch(kubewasm.WatchKind("x", "v1", "ConfigMap").InNamespace("web").WithLabelSelector("a=b")).
		Grant(kubewasm.GrantOn("", "Service").InNamespace("web").Create().Create()).
		Grant(kubewasm.GrantOn("mongodb.com", "*").Patch().PatchStatus().WithForce()).
		ReadKind("v1", "Secret").ReadResource("deployments.apps")
	if len(m.Grants[0].Verbs) != 1 {
		t.Errorf("a verb added twice: %v", m.Grants[0].Verbs)
	}
	if len(m.Reads) != 2 || m.Reads[0].Resource != kubewasm.KindRef("v1", "Secret") || m.Reads[1].Fields != nil {
		t.Errorf("reads: %+v", m.Reads)
	}
	svc := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s", "namespace": ns}}
	}
	db := kubewasm.Namespaced("mongodb.com/v1", "MongoDB", "any", "db")
	for _, c := range []struct {
		intent kubewasm.Intent
		ok     bool
	}{
		{kubewasm.Create(svc("web")), true},
		{kubewasm.Create(svc("web")).Force(), false},
		{kubewasm.Create(svc("other")), false},
		{kubewasm.Patch(db, map[string]any{}).Status().Force(), true},
		{kubewasm.Patch(kubewasm.Namespaced("apps/v1", "Deployment", "web", "d"), map[string]any{}), false},
		{kubewasm.Delete(db), false},
	} {
		err := m.Permits(c.intent)
		if (err == nil) != c.ok {
			j, _ := c.intent.JSON()
			t.Errorf("Permits(%v) = %v", j, err)
		}
	}
	if err := m.Permits(kubewasm.Delete(db)); err == nil || !strings.Contains(err.Error(), "delete") {
		t.Errorf("message: %v", err)
	}
	wildcard := kubewasm.GrantOn("*", "*").Create()
	if !wildcard.Covers(kubewasm.VerbCreate, "anything", "Kind", "", false) {
		t.Errorf("wildcards")
	}
	if kubewasm.GrantOn("", "X").InNamespace("a").Create().Covers(kubewasm.VerbCreate, "", "X", "", false) {
		t.Errorf("a namespaced grant covers cluster-scoped objects")
	}
}

type settings struct {
	Namespace *string `json:"namespace"`
	Interval  string  `json:"interval"`
	Nested    struct {
		Port       int32 `json:"port"`
		TargetPort int32 `json:"targetPort"`
	} `json:"nested"`
	Labels map[string]string `json:"labels"`
	Free   any               `json:"free"`
}

func (s *settings) Default() {
	s.Interval = "30s"
	s.Nested.Port, s.Nested.TargetPort = 80, 8080
}

func TestDecodeSettings(t *testing.T) {
	for _, empty := range []string{"", "  ", "null", " null\n"} {
		s, err := kubewasm.DecodeSettings[settings](empty)
		if err != nil || s.Interval != "30s" || s.Nested.Port != 80 || s.Namespace != nil {
			t.Errorf("%q: %+v %v", empty, s, err)
		}
	}
	s, err := kubewasm.DecodeSettings[settings](`{"nested": {"port": 9000}, "namespace": "web",
		"labels": {"a": "b"}, "free": {"Anything": [1, {"Goes": true}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if s.Nested.Port != 9000 || s.Nested.TargetPort != 8080 || s.Interval != "30s" || *s.Namespace != "web" || s.Labels["a"] != "b" {
		t.Errorf("decoded: %+v", s)
	}
	for bad, want := range map[string]string{
		`{"intervall": "1m"}`:                  "unknown field `intervall`",
		`{"Interval": "1m"}`:                   "unknown field `Interval`",
		`{"nested": {"Port": 1}}`:              "unknown field `nested.Port`",
		`{"interval": "1m", "interval": "2m"}`: "duplicate field `interval`",
		`{"interval": null}`:                   "`interval`: null is not a string",
		`{"nested": null}`:                     "`nested`: null is not a struct",
		`{"labels": null}`:                     "`labels`: null is not a map",
		`{"interval": 5}`:                      "cannot unmarshal number",
		`{"nested": {"port": 1.5}}`:            "cannot unmarshal number 1.5",
		`{} {}`:                                "trailing",
		`[`:                                    "unexpected end",
	} {
		if _, err := kubewasm.DecodeSettings[settings](bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
	s, err = kubewasm.DecodeSettings[settings](`{"labels": {"a": "b", "a": "c"}, "namespace": null, "free": null}`)
	if err != nil || s.Labels["a"] != "c" || s.Namespace != nil {
		t.Errorf("last map key wins, null for pointers and interfaces: %+v %v", s, err)
	}
	free, err := kubewasm.DecodeSettings[kubewasm.Unstructured](`{"x": {"y": 1}}`)
	if n, _, _ := kubewasm.NestedInt64(free, "x", "y"); err != nil || n != 1 {
		t.Errorf("free-form settings: %v %v", free, err)
	}
	if _, err := kubewasm.DecodeSettings[struct{}](`{"x": 1}`); err == nil || err.Error() != "unknown field `x`, there are no fields" {
		t.Errorf("struct{} accepts fields, or says so unlike serde: %v", err)
	}
}

type plugin struct {
	handle func(kubewasm.Event, settings) ([]kubewasm.Intent, error)
}

func (plugin) Describe(s settings) (kubewasm.Manifest, error) {
	return kubewasm.NewManifest("p-"+s.Interval, "1").WatchKind("x", "v1", "ConfigMap"), nil
}

func (p plugin) Handle(ev kubewasm.Event, s settings) ([]kubewasm.Intent, error) {
	return p.handle(ev, s)
}

func TestCallDescribeAndHandle(t *testing.T) {
	m, err := kubewasm.CallDescribe(plugin{}, "")
	if err != nil || m.Name != "p-30s" {
		t.Errorf("describe: %v %v", m.Name, err)
	}
	if _, err := kubewasm.CallDescribe(plugin{}, `{"interval": "bad name"}`); err == nil {
		t.Errorf("an invalid manifest is accepted")
	}
	if _, err := kubewasm.CallDescribe(plugin{}, `{"x": 1}`); err == nil || !strings.HasPrefix(err.Error(), "invalid settings: ") {
		t.Errorf("invalid settings: %v", err)
	}
	ev := kwtest.Added("x", map[string]any{})
	cases := []struct {
		name    string
		handle  func(kubewasm.Event, settings) ([]kubewasm.Intent, error)
		retry   bool
		message string
	}{
		{"plain error", func(kubewasm.Event, settings) ([]kubewasm.Intent, error) {
			return nil, errors.New("boom")
		}, true, "boom"},
		{"permanent", func(kubewasm.Event, settings) ([]kubewasm.Intent, error) {
			return nil, kubewasm.Permanentf("bad %s", "input")
		}, false, "bad input"},
		{"wrapped permanent", func(kubewasm.Event, settings) ([]kubewasm.Intent, error) {
			return nil, fmt.Errorf("decoding: %w", kubewasm.Permanent(errors.New("oops")))
		}, false, "decoding: oops"},
		{"retryable", func(kubewasm.Event, settings) ([]kubewasm.Intent, error) {
			return nil, kubewasm.Retryablef("not cached yet")
		}, true, "not cached yet"},
		{"panic", func(kubewasm.Event, settings) ([]kubewasm.Intent, error) {
			var m map[string]int
			m["x"] = 1
			return nil, nil
		}, true, "plugin panicked: assignment to entry in nil map at kubewasm_test.go:"},
		{"nil intent", func(kubewasm.Event, settings) ([]kubewasm.Intent, error) {
			return []kubewasm.Intent{nil}, nil
		}, false, "intent #0 is nil"},
	}
	for _, c := range cases {
		_, err := kubewasm.CallHandle(plugin{c.handle}, ev, "")
		var he *kubewasm.HandleError
		if !errors.As(err, &he) || he.Retry != c.retry || !strings.Contains(he.Message, c.message) {
			t.Errorf("%s: %#v", c.name, err)
		}
	}
	_, err = kubewasm.CallHandle(plugin{func(kubewasm.Event, settings) ([]kubewasm.Intent, error) { return nil, nil }}, ev, `{"interval": 5}`)
	if !kubewasm.IsPermanent(err) || !strings.HasPrefix(err.Error(), "invalid settings: ") {
		t.Errorf("invalid settings in handle: %v", err)
	}
	out, err := kubewasm.CallHandle(plugin{func(_ kubewasm.Event, s settings) ([]kubewasm.Intent, error) {
		return []kubewasm.Intent{kubewasm.Delete(kubewasm.ClusterScoped("v1", "Namespace", s.Interval))}, nil
	}}, ev, `{"interval": "1m"}`)
	if err != nil || len(out) != 1 {
		t.Errorf("ok: %v %v", out, err)
	}
}

func TestErrors(t *testing.T) {
	if kubewasm.Permanent(nil) != nil || kubewasm.Retryable(nil) != nil || kubewasm.AsHandleError(nil) != nil {
		t.Errorf("nil errors")
	}
	base := errors.New("root")
	p := kubewasm.Permanentf("context: %w", base)
	if !errors.Is(p, base) || p.Error() != "context: root" || !kubewasm.IsPermanent(p) {
		t.Errorf("Permanentf wraps: %v", p)
	}
	if r := kubewasm.Retryable(base); kubewasm.IsPermanent(r) || !errors.Is(r, base) {
		t.Errorf("Retryable")
	}
	if he := kubewasm.AsHandleError(errors.New("x")); !he.Retry || he.Message != "x" {
		t.Errorf("plain errors are retried: %+v", he)
	}
}

var rfc3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

func TestCondition(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"generation": int64(4)},
		"status": map[string]any{"conditions": []any{
			"not an object",
			map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
		}},
	}
	same := kubewasm.NewCondition("Ready", true).WithReason("R").WithMessage("m").ObservedGenerationOf(obj).TransitionedFrom(obj)
	if same.LastTransitionTime != "2020-01-01T00:00:00Z" || *same.ObservedGeneration != 4 {
		t.Errorf("same status: %+v", same)
	}
	got, _ := json.Marshal(same.Map())
	if string(got) != `{"lastTransitionTime":"2020-01-01T00:00:00Z","message":"m","observedGeneration":4,"reason":"R","status":"True","type":"Ready"}` {
		t.Errorf("Map: %s", got)
	}
	flipped := kubewasm.NewCondition("Ready", false).TransitionedFrom(obj)
	if flipped.LastTransitionTime == "2020-01-01T00:00:00Z" || !rfc3339.MatchString(flipped.LastTransitionTime) {
		t.Errorf("flipped: %+v", flipped)
	}
	if c := kubewasm.NewCondition("Other", true).TransitionedFrom(obj); !rfc3339.MatchString(c.LastTransitionTime) {
		t.Errorf("new type: %+v", c)
	}
	u := kubewasm.UnknownCondition("Ready").WithReason("Waiting").ObservedGenerationOf(map[string]any{})
	if m := u.Map(); len(m) != 3 || m["status"] != "Unknown" {
		t.Errorf("unknown: %v", m)
	}
	if !rfc3339.MatchString(kubewasm.Now()) {
		t.Errorf("Now: %s", kubewasm.Now())
	}
}

func TestOwnerReferences(t *testing.T) {
	owner := map[string]any{"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
		"metadata": map[string]any{"name": "blog", "uid": "abc"}}
	r, err := kubewasm.ControllerReferenceTo(owner)
	if err != nil {
		t.Fatal(err)
	}
	child := map[string]any{"metadata": map[string]any{"name": "blog-db",
		"ownerReferences": []any{map[string]any{"uid": "other"}}}}
	if err := r.AddTo(child); err != nil {
		t.Fatal(err)
	}
	if err := r.AddTo(child); err != nil {
		t.Fatal(err)
	}
	refs, _, _ := kubewasm.NestedSlice(child, "metadata", "ownerReferences")
	got, _ := json.Marshal(refs)
	if string(got) != `[{"uid":"other"},{"apiVersion":"sites.kubewasm.dev/v1alpha1","blockOwnerDeletion":true,"controller":true,"kind":"ContentSite","name":"blog","uid":"abc"}]` {
		t.Errorf("refs: %s", got)
	}
	if !kubewasm.IsOwnedBy(child, "abc") || kubewasm.IsOwnedBy(child, "nope") {
		t.Errorf("IsOwnedBy")
	}
	if _, err := kubewasm.OwnerReferenceTo(map[string]any{"kind": "X"}); !kubewasm.IsPermanent(err) {
		t.Errorf("incomplete owner: %v", err)
	}
	if err := r.AddTo(map[string]any{"metadata": "x"}); err == nil {
		t.Errorf("metadata of the wrong type")
	}
	fresh := map[string]any{}
	if err := r.AddTo(fresh); err != nil || !kubewasm.IsOwnedBy(fresh, "abc") {
		t.Errorf("no metadata yet: %v", err)
	}
}

func TestConvertAndToUnstructured(t *testing.T) {
	var s Site
	if err := kubewasm.Convert(map[string]any{"spec": map[string]any{"title": "t"}}, &s); err != nil || s.Spec.Title != "t" {
		t.Errorf("Convert: %+v %v", s, err)
	}
	u, err := kubewasm.ToUnstructured(s)
	if err != nil || u["spec"].(map[string]any)["title"] != "t" || u["spec"].(map[string]any)["replicas"] != int64(0) {
		t.Errorf("ToUnstructured: %v %v", u, err)
	}
	var back Site
	if err := kubewasm.FromUnstructured(u, &back); err != nil || back != s {
		t.Errorf("FromUnstructured: %+v %v", back, err)
	}
}

func TestLogs(t *testing.T) {
	kwtest.Reset()
	kubewasm.Log.Infof("hello %s", "world")
	kubewasm.Log.Warnf("careful")
	kubewasm.Log.Logf(kubewasm.LevelTrace, "t")
	got := kwtest.TakeLogs()
	if len(got) != 3 || got[0].String() != "info: hello world" || got[1].Level != kubewasm.LevelWarn || got[2].Level.String() != "trace" {
		t.Errorf("logs: %v", got)
	}
	if len(kwtest.TakeLogs()) != 0 {
		t.Errorf("TakeLogs does not forget")
	}
}

func TestProjectionsOnWatchesAndReads(t *testing.T) {
	w := kubewasm.WatchKind("pods", "v1", "Pod").WithFields("metadata.labels")
	a, b := w.WithFields("status.phase"), w.WithFields("spec.nodeName")
	if !slices.Equal(a.Fields, []string{"metadata.labels", "status.phase"}) || b.Fields[1] != "spec.nodeName" {
		t.Errorf("watch fields alias or are lost: %v %v", a.Fields, b.Fields)
	}
	m := kubewasm.NewManifest("p", "1").Watch(a).
		Read(kubewasm.ReadKind("v1", "Namespace").WithFields("metadata")).
		Read(kubewasm.ReadResource("deployments.apps"))
	text, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"fields":["metadata.labels","status.phase"]`,
		`"reads":[{"resource":{"apiVersion":"v1","kind":"Namespace"},"fields":["metadata"]},{"resource":{"resource":"deployments.apps"}}]`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("manifest JSON %s lacks %s", text, want)
		}
	}
}
