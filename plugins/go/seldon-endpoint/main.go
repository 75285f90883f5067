// Command seldon-endpoint is the kubewasm plugin "know when it is ready", in Go: when a
// SeldonDeployment (machinelearning.seldon.io/v1) becomes Available (status.state), it asks
// for an Ingress <name> routing http://<name>.<namespace>.<domain>/ to the predictor's
// Service <name>-<predictor>, and records that URL in the annotation
// kubewasm.dev/public-url of the deployment.
//
// It acts on the transition only: an update of an already Available deployment writes
// nothing (the UpdateFunc(old, new) pattern, comparing the old and new objects). The same
// plugin as the Rust plugins/rust/seldon-endpoint; plugins/go/build.sh builds it into
// target/plugins/go/seldon-endpoint.wasm.
package main

import (
	"fmt"
	"strings"

	"kubewasm.dev/kubewasm"
)

const (
	// Name is the plugin's name in its manifest.
	Name = "seldon-endpoint"
	// WatchID is the id of the SeldonDeployment watch.
	WatchID = "seldondeployments"
	// Resource is the resource watched (the kind is not known until the CRD is served).
	Resource = "seldondeployments.v1.machinelearning.seldon.io"
	// URLAnnotation records the public URL on the deployment.
	URLAnnotation = "kubewasm.dev/public-url"
)

// Settings is seldon-endpoint.yaml; every field is optional.
type Settings struct {
	// Namespace: only watch (and write in) this namespace. nil: all namespaces.
	Namespace *string `json:"namespace"`
	// Domain is the DNS suffix: the host is <name>.<namespace>.<domain>.
	Domain string `json:"domain"`
	// IngressClassName is spec.ingressClassName of the Ingress; nil: the cluster's default.
	IngressClassName *string `json:"ingressClassName"`
	// ServicePort is the predictor Service's HTTP port.
	ServicePort int32 `json:"servicePort"`
}

// Default sets the defaults the settings file overrides.
func (s *Settings) Default() {
	s.Domain = "example.com"
	s.ServicePort = 8000
}

// SeldonDeployment is the part of a SeldonDeployment this plugin reads: a user type, the way
// a controller decodes a CRD it does not own (unknown fields are ignored, so the real CRD's
// huge schema does not matter).
type SeldonDeployment struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name              string `json:"name"`
		Namespace         string `json:"namespace"`
		DeletionTimestamp string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Predictors []struct {
			Name string `json:"name"`
		} `json:"predictors"`
	} `json:"spec"`
	Status *struct {
		State string `json:"state"` // Creating, Available, Failed
	} `json:"status"`
}

// IsAvailable reports status.state == "Available".
func (sd SeldonDeployment) IsAvailable() bool {
	return sd.Status != nil && sd.Status.State == "Available"
}

// decode decodes one of the event's objects and checks the fields every SeldonDeployment has.
func decode(ev kubewasm.Event, old bool) (sd SeldonDeployment, found bool, err error) {
	if old {
		found, err = ev.OldObject(&sd)
	} else {
		found, err = true, ev.Object(&sd)
	}
	if err != nil || !found {
		return sd, found, err
	}
	what := "object"
	if old {
		what = "old object"
	}
	for _, f := range []struct{ v, name string }{
		{sd.APIVersion, "apiVersion"}, {sd.Kind, "kind"}, {sd.Metadata.Name, "metadata.name"},
	} {
		if f.v == "" {
			return sd, true, kubewasm.Permanentf("%s does not decode as SeldonDeployment: missing field `%s`", what, f.name)
		}
	}
	return sd, true, nil
}

// Endpoint is the plugin.
type Endpoint struct{}

func init() { kubewasm.Export(Endpoint{}) }

func main() {}

// Describe watches SeldonDeployments; may create Ingresses and patch SeldonDeployments.
func (Endpoint) Describe(s Settings) (kubewasm.Manifest, error) {
	if s.Domain == "" || strings.HasPrefix(s.Domain, ".") {
		return kubewasm.Manifest{}, fmt.Errorf("domain %q is not a DNS suffix", s.Domain)
	}
	ns := ""
	if s.Namespace != nil {
		ns = *s.Namespace
	}
	return kubewasm.NewManifest(Name, "0.1.0").
		Watch(kubewasm.WatchResource(WatchID, Resource).InNamespace(ns)).
		Grant(kubewasm.GrantOn("networking.k8s.io", "Ingress").Create().InNamespace(ns)).
		Grant(kubewasm.GrantOn("machinelearning.seldon.io", "SeldonDeployment").Patch().InNamespace(ns)), nil
}

// BecomesAvailable reports whether this event is the moment the deployment becomes Available.
func BecomesAvailable(ev kubewasm.Event) (bool, error) {
	if ev.IsDeleted() {
		return false, nil
	}
	now, _, err := decode(ev, false)
	if err != nil {
		return false, err
	}
	if !now.IsAvailable() || now.Metadata.DeletionTimestamp != "" {
		return false, nil
	}
	if ev.IsModified() {
		before, found, err := decode(ev, true)
		if err != nil {
			return false, err
		}
		return !(found && before.IsAvailable()), nil
	}
	return true, nil
}

// Handle exposes the deployment when it becomes Available; nothing otherwise.
func (Endpoint) Handle(ev kubewasm.Event, s Settings) ([]kubewasm.Intent, error) {
	available, err := BecomesAvailable(ev)
	if err != nil || !available {
		return nil, err
	}
	sd, _, err := decode(ev, false)
	if err != nil {
		return nil, err
	}
	return Expose(sd, s)
}

// HostFor is the public host name: <name>.<namespace>.<domain>.
func HostFor(sd SeldonDeployment, s Settings) (string, error) {
	if sd.Metadata.Namespace == "" {
		return "", kubewasm.Permanentf("SeldonDeployment has no metadata.namespace")
	}
	return sd.Metadata.Name + "." + sd.Metadata.Namespace + "." + s.Domain, nil
}

// Expose is the Ingress and the URL annotation for an Available deployment.
func Expose(sd SeldonDeployment, s Settings) ([]kubewasm.Intent, error) {
	name := sd.Metadata.Name
	if name == "" {
		return nil, kubewasm.Permanentf("SeldonDeployment has no metadata.name")
	}
	host, err := HostFor(sd, s)
	if err != nil {
		return nil, err
	}
	namespace := sd.Metadata.Namespace
	predictor := "default"
	if len(sd.Spec.Predictors) > 0 && sd.Spec.Predictors[0].Name != "" {
		predictor = sd.Spec.Predictors[0].Name
	}
	url := "http://" + host + "/"

	ingress := Ingress{
		APIVersion: "networking.k8s.io/v1",
		Kind:       "Ingress",
		Metadata: ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kubewasm"},
		},
		Spec: IngressSpec{
			IngressClassName: s.IngressClassName,
			Rules: []IngressRule{{
				Host: host,
				HTTP: &HTTPIngressRuleValue{Paths: []HTTPIngressPath{{
					Path:     "/",
					PathType: "Prefix",
					Backend: IngressBackend{Service: &IngressServiceBackend{
						Name: name + "-" + predictor,
						Port: ServiceBackendPort{Number: s.ServicePort},
					}},
				}}},
			}},
		},
	}

	target := kubewasm.Namespaced(sd.APIVersion, sd.Kind, namespace, name)
	annotation := map[string]any{
		"apiVersion": sd.APIVersion,
		"kind":       sd.Kind,
		"metadata": map[string]any{
			"name":        name,
			"namespace":   namespace,
			"annotations": map[string]any{URLAnnotation: url},
		},
	}
	kubewasm.Log.Infof("%s/%s is Available: exposing %s", namespace, name, url)
	return []kubewasm.Intent{
		kubewasm.Create(ingress).OwnedByTrigger(),
		kubewasm.Patch(target, annotation),
	}, nil
}

// Ingress is the part of a networking/v1 Ingress this plugin writes (the shape of
// networkingv1.Ingress; omitempty keeps unset fields out of the apply).
type Ingress struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   ObjectMeta  `json:"metadata"`
	Spec       IngressSpec `json:"spec"`
}

// ObjectMeta is the part of metav1.ObjectMeta this plugin writes.
type ObjectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// IngressSpec is networkingv1.IngressSpec (the fields used).
type IngressSpec struct {
	IngressClassName *string       `json:"ingressClassName,omitempty"`
	Rules            []IngressRule `json:"rules,omitempty"`
}

// IngressRule is networkingv1.IngressRule.
type IngressRule struct {
	Host string                `json:"host,omitempty"`
	HTTP *HTTPIngressRuleValue `json:"http,omitempty"`
}

// HTTPIngressRuleValue is networkingv1.HTTPIngressRuleValue.
type HTTPIngressRuleValue struct {
	Paths []HTTPIngressPath `json:"paths"`
}

// HTTPIngressPath is networkingv1.HTTPIngressPath.
type HTTPIngressPath struct {
	Path     string         `json:"path,omitempty"`
	PathType string         `json:"pathType"`
	Backend  IngressBackend `json:"backend"`
}

// IngressBackend is networkingv1.IngressBackend (service backends only).
type IngressBackend struct {
	Service *IngressServiceBackend `json:"service,omitempty"`
}

// IngressServiceBackend is networkingv1.IngressServiceBackend.
type IngressServiceBackend struct {
	Name string             `json:"name"`
	Port ServiceBackendPort `json:"port"`
}

// ServiceBackendPort is networkingv1.ServiceBackendPort (by number).
type ServiceBackendPort struct {
	Number int32 `json:"number,omitempty"`
}
