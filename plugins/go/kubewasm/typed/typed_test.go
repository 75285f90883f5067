package typed

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"kubewasm.dev/kubewasm"
	"kubewasm.dev/kubewasm/kwtest"
)

// The shapes of k8s.io/api types that matter here, without importing them: TypeMeta
// inline with omitempty, ObjectMeta with a creationTimestamp that encodes as null, a status
// without omitempty, and a port whose zero value is encoded.
type typeMeta struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

type objectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp *string           `json:"creationTimestamp"`
	Labels            map[string]string `json:"labels,omitempty"`
	ManagedFields     []any             `json:"managedFields,omitempty"`
}

type service struct {
	typeMeta   `json:",inline"`
	objectMeta `json:"metadata,omitempty"`
	Spec       struct {
		Ports []struct {
			Port       int32 `json:"port"`
			TargetPort int32 `json:"targetPort"`
		} `json:"ports,omitempty"`
	} `json:"spec,omitempty"`
	Status struct {
		LoadBalancer struct{} `json:"loadBalancer"`
	} `json:"status"`
}

type site struct {
	typeMeta   `json:",inline"`
	objectMeta `json:"metadata,omitempty"`
	Status     struct {
		Conditions []kubewasm.Condition `json:"conditions,omitempty"`
	} `json:"status"`
}

func init() { Register(&site{}, "sites.kubewasm.dev/v1alpha1", "ContentSite") }

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGVKFromPackagePaths(t *testing.T) {
	for _, c := range []struct{ pkg, name, av, kind string }{
		{"k8s.io/api/networking/v1", "Ingress", "networking.k8s.io/v1", "Ingress"},
		{"k8s.io/api/core/v1", "Service", "v1", "Service"},
		{"k8s.io/api/apps/v1", "Deployment", "apps/v1", "Deployment"},
		{"k8s.io/api/rbac/v1", "Role", "rbac.authorization.k8s.io/v1", "Role"},
		{"k8s.io/api/flowcontrol/v1", "FlowSchema", "flowcontrol.apiserver.k8s.io/v1", "FlowSchema"},
		{"k8s.io/api/policy/v1", "PodDisruptionBudget", "policy/v1", "PodDisruptionBudget"},
		{"k8s.io/client-go/applyconfigurations/networking/v1", "IngressApplyConfiguration", "networking.k8s.io/v1", "Ingress"},
		{"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", "CustomResourceDefinition", "apiextensions.k8s.io/v1", "CustomResourceDefinition"},
	} {
		g, ok := gvkOfType(c.pkg, c.name)
		if !ok || g.APIVersion != c.av || g.Kind != c.kind {
			t.Errorf("%s.%s: %+v %v, want %s %s", c.pkg, c.name, g, ok, c.av, c.kind)
		}
	}
	for _, pkg := range []string{"example.com/x", "k8s.io/api/unknownfolder/v1", "k8s.io/api/core", "k8s.io/apimachinery/pkg/apis/meta/v1"} {
		if g, ok := gvkOfType(pkg, "Thing"); ok {
			t.Errorf("%s: %+v", pkg, g)
		}
	}
}

func TestObjectSetsTypeMetaAndStripsServerFields(t *testing.T) {
	var svc service
	svc.Name, svc.Namespace, svc.UID, svc.ResourceVersion, svc.Generation = "web", "shop", "u1", "42", 3
	svc.ManagedFields = []any{map[string]any{"manager": "kubectl"}}
	u, err := Object(&svc, WithGVK("v1", "Service"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{}}`
	if got := asJSON(t, u); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The original is untouched.
	if svc.UID != "u1" || svc.APIVersion != "" {
		t.Errorf("the object changed: %+v", svc)
	}
	// Without a GVK the type must be known.
	if _, err := Object(&svc); err == nil || !strings.Contains(err.Error(), "typed.WithGVK") {
		t.Errorf("unknown type: %v", err)
	}
	// Set by hand: kept.
	svc.APIVersion, svc.Kind = "v1", "Service"
	if _, err := Object(svc); err != nil {
		t.Error(err)
	}
}

func TestTheZeroValuePitfallStaysVisible(t *testing.T) {
	// A typed struct sends what has no omitempty: the helpers drop status (not a status
	// write) but keep a zero the plugin may have meant, as the README explains.
	var svc service
	svc.Name, svc.Namespace = "web", "shop"
	svc.Spec.Ports = append(svc.Spec.Ports, struct {
		Port       int32 `json:"port"`
		TargetPort int32 `json:"targetPort"`
	}{Port: 80})
	in, err := Create(&svc, WithGVK("v1", "Service"))
	if err != nil {
		t.Fatal(err)
	}
	got := asJSON(t, in.Object)
	if !strings.Contains(got, `"targetPort":0`) || strings.Contains(got, "loadBalancer") {
		t.Errorf("%s", got)
	}
}

func TestOwnersConditionsAndStatusWrites(t *testing.T) {
	owner := &site{}
	owner.Name, owner.Namespace, owner.UID, owner.Generation = "blog", "web", "abc", 7
	owner.Status.Conditions = []kubewasm.Condition{{Type: "Ready", Status: "True", LastTransitionTime: "2026-01-02T03:04:05Z"}}

	var svc service
	svc.Name, svc.Namespace = "blog-svc", "web"
	in, err := Create(&svc, WithGVK("v1", "Service"), ControlledBy(owner))
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, []kubewasm.Intent{in}, `[{"create": {"force": false, "ownedByTrigger": false, "object": {
		"apiVersion": "v1", "kind": "Service", "metadata": {"name": "blog-svc", "namespace": "web",
		"ownerReferences": [{"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite", "name": "blog",
			"uid": "abc", "controller": true, "blockOwnerDeletion": true}]}, "spec": {}}}}]`)

	// An owner without a uid is refused, permanently.
	if _, err := ControllerReference(&site{}); err == nil || !strings.Contains(err.Error(), "owner has no metadata.name") {
		t.Errorf("no uid: %v", err)
	}

	c, err := Condition(owner, kubewasm.NewCondition("Ready", true).WithReason("Served"))
	if err != nil {
		t.Fatal(err)
	}
	if c.LastTransitionTime != "2026-01-02T03:04:05Z" || c.ObservedGeneration == nil || *c.ObservedGeneration != 7 {
		t.Errorf("condition: %+v", c)
	}
	st, err := ApplyStatus(owner, WithCondition(c))
	if err != nil {
		t.Fatal(err)
	}
	kwtest.AssertIntents(t, []kubewasm.Intent{st}, `[{"patch": {"status": true, "force": false, "strategy": "apply",
		"target": {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite", "namespace": "web", "name": "blog"},
		"body": {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite", "metadata": {"name": "blog", "namespace": "web"},
			"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Served", "observedGeneration": 7,
				"lastTransitionTime": "2026-01-02T03:04:05Z"}]}}}}]`)
}

func TestGVKOfPrefersWhatTheObjectSays(t *testing.T) {
	g, err := GVKOf(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"})
	if err != nil || !reflect.DeepEqual(g, GVK{"apps/v1", "Deployment"}) {
		t.Errorf("%+v %v", g, err)
	}
	g, err = GVKOf(&site{})
	if err != nil || g.Kind != "ContentSite" {
		t.Errorf("%+v %v", g, err)
	}
	if _, err := GVKOf(nil); err == nil {
		t.Error("nil has a GVK")
	}
}
