// Package typed is the opt-in bridge between typed Kubernetes objects (the structs of
// k8s.io/api, client-go's apply configurations, your own CRD structs) and the intents of a
// kubewasm plugin: it sets apiVersion and kind from the Go type, removes the fields the API
// server sets, and takes typed owners and conditions.
//
//	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: spec}
//	in, err := typed.Create(ing, typed.ControlledBy(site)) // apiVersion networking.k8s.io/v1, kind Ingress
//	st, err := typed.ApplyStatus(site, typed.WithCondition(kubewasm.NewCondition("Ready", true)))
//
// It imports the standard library and the layer only, never a k8s.io module, and works on
// the object's JSON (accepting any value encoding/json encodes to an object): a plugin that
// uses it pays nothing for k8s.io/apimachinery it did not import itself, and one that does
// not use it pays nothing at all (it is a module of its own, kubewasm.dev/kubewasm/typed).
//
// What a typed struct cannot say, and the reason client-go's apply configurations (or a
// map) are the better body for server-side apply: a field without omitempty is sent at
// its zero value (`"targetPort": 0`, `"status": {"loadBalancer": {}}`), and the API server
// then records it as set, and owned, by this plugin. This package removes status (but for
// status writes) and the server-set metadata; it cannot tell a zero the plugin meant from a
// zero it did not, so it leaves the other fields as encoded.
package typed

import (
	"reflect"
	"strings"
	"sync"

	"kubewasm.dev/kubewasm"
)

// GVK is a kind's apiVersion ("group/version", or "v1" for the core group) and kind.
type GVK struct {
	APIVersion string
	Kind       string
}

var (
	registryMu sync.RWMutex
	registry   = map[reflect.Type]GVK{}
)

// Register says which apiVersion and kind values of sample's Go type are (your own CRD
// structs: `typed.Register(&ContentSite{}, "sites.kubewasm.dev/v1alpha1", "ContentSite")` in
// an init). The types of k8s.io/api and client-go's apply configurations need no
// registration.
func Register(sample any, apiVersion, kind string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[baseType(reflect.TypeOf(sample))] = GVK{APIVersion: apiVersion, Kind: kind}
}

func baseType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// Groups of the k8s.io/api packages whose folder name is not the group's first label plus
// ".k8s.io" (the legacy groups keep their bare name; the core group is "").
var groupOfFolder = map[string]string{
	"core":              "",
	"apps":              "apps",
	"autoscaling":       "autoscaling",
	"batch":             "batch",
	"extensions":        "extensions",
	"policy":            "policy",
	"rbac":              "rbac.authorization.k8s.io",
	"flowcontrol":       "flowcontrol.apiserver.k8s.io",
	"apiserverinternal": "internal.apiserver.k8s.io",
}

// Folders of k8s.io/api whose group is FOLDER.k8s.io.
var k8sIOFolders = map[string]bool{
	"admission": true, "admissionregistration": true, "apidiscovery": true,
	"authentication": true, "authorization": true, "certificates": true, "coordination": true,
	"discovery": true, "events": true, "imagepolicy": true, "networking": true, "node": true,
	"resource": true, "scheduling": true, "storage": true, "storagemigration": true,
}

// The packages whose path says the group and version: k8s.io/api/FOLDER/VERSION,
// k8s.io/client-go/applyconfigurations/FOLDER/VERSION (types named KindApplyConfiguration),
// and the CRD types of k8s.io/apiextensions-apiserver.
const (
	apiPrefix        = "k8s.io/api/"
	applyPrefix      = "k8s.io/client-go/applyconfigurations/"
	apiextensionsPkg = "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/"
)

// gvkOfType is the apiVersion and kind of a Go type from its package path and name.
func gvkOfType(pkgPath, name string) (GVK, bool) {
	var rest string
	switch {
	case strings.HasPrefix(pkgPath, apiPrefix):
		rest = strings.TrimPrefix(pkgPath, apiPrefix)
	case strings.HasPrefix(pkgPath, applyPrefix):
		rest = strings.TrimPrefix(pkgPath, applyPrefix)
		name = strings.TrimSuffix(name, "ApplyConfiguration")
	case strings.HasPrefix(pkgPath, apiextensionsPkg):
		rest = "apiextensions/" + strings.TrimPrefix(pkgPath, apiextensionsPkg)
	default:
		return GVK{}, false
	}
	folder, version, ok := strings.Cut(rest, "/")
	if !ok || version == "" || strings.Contains(version, "/") || name == "" {
		return GVK{}, false
	}
	group, known := groupOfFolder[folder]
	if !known {
		if !k8sIOFolders[folder] && folder != "apiextensions" {
			return GVK{}, false
		}
		group = folder + ".k8s.io"
	}
	if group == "" {
		return GVK{APIVersion: version, Kind: name}, true
	}
	return GVK{APIVersion: group + "/" + version, Kind: name}, true
}

// GVKOf is obj's apiVersion and kind: the ones it carries when set, else the ones of its Go
// type (registered, or from its k8s.io/api or client-go package). A permanent error when
// neither says.
func GVKOf(obj any) (GVK, error) {
	u, err := kubewasm.ToUnstructured(obj)
	if err != nil {
		return GVK{}, kubewasm.Permanentf("encoding %T: %v", obj, err)
	}
	return gvkOf(obj, u)
}

func gvkOf(obj any, u kubewasm.Unstructured) (GVK, error) {
	if av, k := u.GetAPIVersion(), u.GetKind(); av != "" && k != "" {
		return GVK{APIVersion: av, Kind: k}, nil
	}
	t := baseType(reflect.TypeOf(obj))
	if t == nil {
		return GVK{}, kubewasm.Permanentf("no object (nil)")
	}
	registryMu.RLock()
	g, ok := registry[t]
	registryMu.RUnlock()
	if ok {
		return g, nil
	}
	if g, ok := gvkOfType(t.PkgPath(), t.Name()); ok {
		return g, nil
	}
	return GVK{}, kubewasm.Permanentf(
		"cannot tell the apiVersion and kind of %v: set them, pass typed.WithGVK, or typed.Register the type", t)
}

// Option changes what Object (and the intents built on it) makes of an object.
type Option func(*options)

type options struct {
	gvk        *GVK
	status     bool
	owners     []ownerRef
	conditions []kubewasm.Condition
}

type ownerRef struct {
	owner      any
	controller bool
}

// WithGVK sets apiVersion and kind (a type this package cannot name, without Register).
func WithGVK(apiVersion, kind string) Option {
	return func(o *options) { o.gvk = &GVK{APIVersion: apiVersion, Kind: kind} }
}

// ControlledBy adds a controller owner reference to owner, a typed (or unstructured)
// object with apiVersion/kind (or a known Go type), metadata.name and metadata.uid: the
// garbage collector deletes the object with its owner. (Create(..).OwnedByTrigger() is the
// same for the triggering object, filled in by the host.)
func ControlledBy(owner any) Option {
	return func(o *options) { o.owners = append(o.owners, ownerRef{owner: owner, controller: true}) }
}

// OwnedBy adds a plain (non-controller) owner reference to owner.
func OwnedBy(owner any) Option {
	return func(o *options) { o.owners = append(o.owners, ownerRef{owner: owner}) }
}

// WithCondition sets a condition in status.conditions (replacing the one of the same type)
// and makes the body a status write's: status is kept.
func WithCondition(c kubewasm.Condition) Option {
	return func(o *options) {
		o.status = true
		o.conditions = append(o.conditions, c)
	}
}

// KeepStatus keeps status (a status write). Without it status is removed: a typed struct
// always encodes one (`"status": {}` at least), and the main resource ignores it anyway.
func KeepStatus() Option { return func(o *options) { o.status = true } }

// Server-set metadata: never part of what a plugin writes.
var serverSet = []string{
	"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink",
	"deletionTimestamp", "deletionGracePeriodSeconds",
}

// Object is obj as the body of a write: its JSON as an Unstructured, apiVersion and kind
// set (GVKOf, or WithGVK), the server-set metadata removed (resourceVersion, uid,
// creationTimestamp, managedFields, generation, selfLink, deletion*), status removed unless
// KeepStatus or WithCondition, empty metadata maps (labels: {}) dropped, and owners and
// conditions added. obj itself is not changed.
func Object(obj any, opts ...Option) (kubewasm.Unstructured, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	u, err := kubewasm.ToUnstructured(obj)
	if err != nil {
		return nil, kubewasm.Permanentf("encoding %T: %v", obj, err)
	}
	if u == nil {
		return nil, kubewasm.Permanentf("%T encodes to null, not an object", obj)
	}
	g := GVK{}
	if o.gvk != nil {
		g = *o.gvk
	} else if g, err = gvkOf(obj, u); err != nil {
		return nil, err
	}
	u["apiVersion"], u["kind"] = g.APIVersion, g.Kind
	if meta, ok := u["metadata"].(map[string]any); ok {
		for _, f := range serverSet {
			delete(meta, f)
		}
		for _, f := range []string{"labels", "annotations", "ownerReferences", "finalizers"} {
			if empty(meta[f]) {
				delete(meta, f)
			}
		}
	}
	if !o.status {
		delete(u, "status")
	}
	for _, r := range o.owners {
		ref, err := reference(r.owner, r.controller)
		if err != nil {
			return nil, err
		}
		if err := ref.AddTo(u); err != nil {
			return nil, err
		}
	}
	for _, c := range o.conditions {
		if err := setCondition(u, c); err != nil {
			return nil, err
		}
	}
	return u, nil
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

func setCondition(u kubewasm.Unstructured, c kubewasm.Condition) error {
	status, ok := u["status"].(map[string]any)
	if u["status"] == nil {
		status, ok = map[string]any{}, true
		u["status"] = status
	}
	if !ok {
		return kubewasm.Permanentf("status is not an object")
	}
	var list []any
	switch v := status["conditions"].(type) {
	case nil:
	case []any:
		list = v
	default:
		return kubewasm.Permanentf("status.conditions is not a list")
	}
	kept := list[:0:0]
	for _, item := range list {
		if m, isMap := item.(map[string]any); isMap && m["type"] == c.Type {
			continue
		}
		kept = append(kept, item)
	}
	status["conditions"] = append(kept, c.Map())
	return nil
}

func reference(owner any, controller bool) (kubewasm.OwnerReference, error) {
	u, err := kubewasm.ToUnstructured(owner)
	if err != nil {
		return kubewasm.OwnerReference{}, kubewasm.Permanentf("encoding the owner %T: %v", owner, err)
	}
	if u == nil {
		return kubewasm.OwnerReference{}, kubewasm.Permanentf("no owner (%T is null)", owner)
	}
	g, err := gvkOf(owner, u)
	if err != nil {
		return kubewasm.OwnerReference{}, err
	}
	u["apiVersion"], u["kind"] = g.APIVersion, g.Kind
	if controller {
		return kubewasm.ControllerReferenceTo(u)
	}
	return kubewasm.OwnerReferenceTo(u)
}

// ControllerReference is a controller reference to a typed owner (metav1.NewControllerRef).
func ControllerReference(owner any) (kubewasm.OwnerReference, error) {
	return reference(owner, true)
}

// OwnerReference is a plain reference to a typed owner.
func OwnerReference(owner any) (kubewasm.OwnerReference, error) {
	return reference(owner, false)
}

// Condition fills c from the typed object it describes: ObservedGeneration from its
// metadata.generation, LastTransitionTime kept from its same-type condition when the
// status is unchanged (so re-applying is a no-op), now otherwise.
func Condition(observed any, c kubewasm.Condition) (kubewasm.Condition, error) {
	u, err := kubewasm.ToUnstructured(observed)
	if err != nil {
		return c, kubewasm.Permanentf("encoding %T: %v", observed, err)
	}
	return c.ObservedGenerationOf(u).TransitionedFrom(u), nil
}

// Create is kubewasm.Create of Object(obj, opts...).
func Create(obj any, opts ...Option) (*kubewasm.CreateIntent, error) {
	u, err := Object(obj, opts...)
	if err != nil {
		return nil, err
	}
	return kubewasm.Create(u), nil
}

// Apply is a server-side apply patch of the object obj names with Object(obj, opts...) as
// its body: the fields this plugin owns.
func Apply(obj any, opts ...Option) (*kubewasm.PatchIntent, error) {
	u, err := Object(obj, opts...)
	if err != nil {
		return nil, err
	}
	ref, err := kubewasm.RefOf(u)
	if err != nil {
		return nil, err
	}
	return kubewasm.Patch(ref, u), nil
}

// ApplyStatus is a server-side apply of obj's status subresource: apiVersion, kind,
// metadata.name and metadata.namespace, and status (with the WithCondition conditions).
func ApplyStatus(obj any, opts ...Option) (*kubewasm.PatchIntent, error) {
	u, err := Object(obj, append(opts, KeepStatus())...)
	if err != nil {
		return nil, err
	}
	ref, err := kubewasm.RefOf(u)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{"name": ref.Name}
	if ref.Namespace != "" {
		meta["namespace"] = ref.Namespace
	}
	body := map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "metadata": meta}
	if s, ok := u["status"]; ok {
		body["status"] = s
	}
	return kubewasm.Patch(ref, body).Status(), nil
}
