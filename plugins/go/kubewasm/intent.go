package kubewasm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ObjectRef names the object an intent acts on. Namespace "" means a cluster-scoped object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// Namespaced is the reference of a namespaced object.
func Namespaced(apiVersion, kind, namespace, name string) ObjectRef {
	return ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}
}

// ClusterScoped is the reference of a cluster-scoped object.
func ClusterScoped(apiVersion, kind, name string) ObjectRef {
	return ObjectRef{APIVersion: apiVersion, Kind: kind, Name: name}
}

// RefOf is the reference of an object: its apiVersion, kind, metadata.name and
// metadata.namespace (if any). A permanent error when one of the first three is missing.
func RefOf(obj map[string]any) (ObjectRef, error) {
	u := Unstructured(obj)
	if u.GetAPIVersion() == "" {
		return ObjectRef{}, Permanentf("object has no apiVersion")
	}
	if u.GetKind() == "" {
		return ObjectRef{}, Permanentf("object has no kind")
	}
	name, err := u.RequireName()
	if err != nil {
		return ObjectRef{}, err
	}
	return ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: name}, nil
}

// Group is the API group of the reference ("" for the core group).
func (r ObjectRef) Group() string { return GroupOf(r.APIVersion) }

// String is "apiVersion kind namespace/name" (or "apiVersion kind name").
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s %s", r.APIVersion, r.Kind, r.Name)
	}
	return fmt.Sprintf("%s %s %s/%s", r.APIVersion, r.Kind, r.Namespace, r.Name)
}

// GroupOf is the API group of an apiVersion: "apps" for "apps/v1", "" for "v1".
func GroupOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

// Intent is a write the plugin asks the host to make: a *CreateIntent, *PatchIntent or
// *DeleteIntent, built with Create, Patch, MergePatch or Delete.
type Intent interface {
	// Verb is what a grant must allow for this intent.
	Verb() Verb
	// Target is the object the intent acts on.
	Target() (ObjectRef, error)
	// Forced reports whether the intent takes fields from other managers.
	Forced() bool
	// JSON is the intent in the shape of a kubewasm test case (`{"create": {...}}`), with the
	// objects as JSON values; the host compares exactly this.
	JSON() (map[string]any, error)
	isIntent()
}

// CreateIntent creates or converges a whole object with server-side apply.
type CreateIntent struct {
	// Object is the complete object: anything encoding/json encodes to an object with
	// apiVersion, kind, metadata.name (and metadata.namespace for namespaced kinds).
	Object any
	// IsForced takes ownership of fields another manager owns (needs a grant with AllowForce).
	IsForced bool
	// IsOwnedByTrigger makes the triggering object the controller owner of this one.
	IsOwnedByTrigger bool
}

// Create asks for object to be created or converged (server-side apply of the whole object).
// object is an Unstructured, a map, or any struct with json tags.
func Create(object any) *CreateIntent { return &CreateIntent{Object: object} }

// OwnedByTrigger makes the triggering object the controller owner of the created one
// (ownerReference with controller: true), so deleting the trigger deletes it.
func (c *CreateIntent) OwnedByTrigger() *CreateIntent { c.IsOwnedByTrigger = true; return c }

// Force takes ownership of fields another field manager owns (the grant must AllowForce).
func (c *CreateIntent) Force() *CreateIntent { c.IsForced = true; return c }

// Verb is VerbCreate.
func (c *CreateIntent) Verb() Verb { return VerbCreate }

// Forced reports whether Force was set.
func (c *CreateIntent) Forced() bool { return c.IsForced }

// Target is the reference of the object to create.
func (c *CreateIntent) Target() (ObjectRef, error) {
	u, err := toObject(c.Object, "created object")
	if err != nil {
		return ObjectRef{}, err
	}
	return RefOf(u)
}

// JSON is {"create": {"object": ..., "force": ..., "ownedByTrigger": ...}}.
func (c *CreateIntent) JSON() (map[string]any, error) {
	u, err := toObject(c.Object, "created object")
	if err != nil {
		return nil, err
	}
	return map[string]any{"create": map[string]any{
		"object": map[string]any(u), "force": c.IsForced, "ownedByTrigger": c.IsOwnedByTrigger,
	}}, nil
}

func (*CreateIntent) isIntent() {}

// PatchStrategy is how a patch body is applied.
type PatchStrategy string

const (
	// Apply is server-side apply of a partial object under the plugin's field manager.
	Apply PatchStrategy = "apply"
	// Merge is a JSON merge patch (RFC 7386): no field ownership.
	Merge PatchStrategy = "merge"
)

// PatchIntent changes part of an existing object.
type PatchIntent struct {
	Ref ObjectRef
	// Body is the patch: anything encoding/json encodes to an object. For Apply, a partial
	// object (apiVersion, kind and metadata.name are filled in from Ref by the host when absent).
	Body     any
	Strategy PatchStrategy
	// IsStatus patches the status subresource.
	IsStatus bool
	// IsForced takes ownership of conflicting fields (Apply only; needs AllowForce).
	IsForced bool
}

// Patch asks for a server-side apply patch of target: body holds the fields this plugin
// manages.
func Patch(target ObjectRef, body any) *PatchIntent {
	return &PatchIntent{Ref: target, Body: body, Strategy: Apply}
}

// MergePatch asks for a JSON merge patch (RFC 7386) of target: no field ownership.
func MergePatch(target ObjectRef, body any) *PatchIntent {
	return &PatchIntent{Ref: target, Body: body, Strategy: Merge}
}

// Status patches the status subresource instead of the main resource.
func (p *PatchIntent) Status() *PatchIntent { p.IsStatus = true; return p }

// Force takes ownership of conflicting fields (Apply only; the grant must AllowForce).
func (p *PatchIntent) Force() *PatchIntent { p.IsForced = true; return p }

// Verb is VerbPatchStatus for status patches, VerbPatch otherwise.
func (p *PatchIntent) Verb() Verb {
	if p.IsStatus {
		return VerbPatchStatus
	}
	return VerbPatch
}

// Forced reports whether Force was set.
func (p *PatchIntent) Forced() bool { return p.IsForced }

// Target is the patched object.
func (p *PatchIntent) Target() (ObjectRef, error) { return p.Ref, nil }

// JSON is {"patch": {"target": ..., "body": ..., "strategy": ..., "status": ..., "force": ...}}.
func (p *PatchIntent) JSON() (map[string]any, error) {
	body, err := toObject(p.Body, "patch body")
	if err != nil {
		return nil, err
	}
	strategy := p.Strategy
	if strategy == "" {
		strategy = Apply
	}
	return map[string]any{"patch": map[string]any{
		"target": refJSON(p.Ref), "body": map[string]any(body), "strategy": string(strategy),
		"status": p.IsStatus, "force": p.IsForced,
	}}, nil
}

func (*PatchIntent) isIntent() {}

// Propagation is how dependents are treated when an object is deleted.
type Propagation string

const (
	// Background deletes the object now; the garbage collector deletes dependents afterwards.
	Background Propagation = "Background"
	// Foreground deletes dependents first, then the object.
	Foreground Propagation = "Foreground"
	// Orphan keeps dependents, removing their owner references.
	Orphan Propagation = "Orphan"
)

// DeleteIntent deletes an object.
type DeleteIntent struct {
	Ref ObjectRef
	// Precondition: only delete while the object has this uid ("" for none).
	WithUID string
	// Precondition: only delete while the object has this resourceVersion ("" for none).
	WithResourceVersion string
	// "" lets the server choose (its default for the kind).
	WithPropagation Propagation
}

// Delete asks for target to be deleted.
func Delete(target ObjectRef) *DeleteIntent { return &DeleteIntent{Ref: target} }

// UID deletes only while the object still has this uid.
func (d *DeleteIntent) UID(uid string) *DeleteIntent { d.WithUID = uid; return d }

// ResourceVersion deletes only while the object still has this resourceVersion.
func (d *DeleteIntent) ResourceVersion(rv string) *DeleteIntent {
	d.WithResourceVersion = rv
	return d
}

// Propagation sets the propagation policy.
func (d *DeleteIntent) Propagation(p Propagation) *DeleteIntent { d.WithPropagation = p; return d }

// Verb is VerbDelete.
func (d *DeleteIntent) Verb() Verb { return VerbDelete }

// Forced is false: deletes take no fields.
func (d *DeleteIntent) Forced() bool { return false }

// Target is the deleted object.
func (d *DeleteIntent) Target() (ObjectRef, error) { return d.Ref, nil }

// JSON is {"delete": {"target": ..., "uid": ..., "resourceVersion": ..., "propagation": ...}}
// (the last three only when set).
func (d *DeleteIntent) JSON() (map[string]any, error) {
	out := map[string]any{"target": refJSON(d.Ref)}
	if d.WithUID != "" {
		out["uid"] = d.WithUID
	}
	if d.WithResourceVersion != "" {
		out["resourceVersion"] = d.WithResourceVersion
	}
	switch d.WithPropagation {
	case "":
	case Background, Foreground, Orphan:
		out["propagation"] = string(d.WithPropagation)
	default:
		return nil, Permanentf("unknown propagation %q (Background, Foreground or Orphan)", d.WithPropagation)
	}
	return map[string]any{"delete": out}, nil
}

func (*DeleteIntent) isIntent() {}

func refJSON(r ObjectRef) map[string]any {
	out := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name}
	if r.Namespace != "" {
		out["namespace"] = r.Namespace
	}
	return out
}

// toObject encodes any value to JSON and back, so intents carry plain JSON objects.
func toObject(v any, what string) (Unstructured, error) {
	if v == nil {
		return nil, Permanentf("%s is nil", what)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, Permanentf("cannot serialize %s: %v", what, err)
	}
	u, err := ParseUnstructured(data)
	if err != nil {
		return nil, Permanentf("%s is not a JSON object", what)
	}
	return u, nil
}

// marshalObject is the JSON text of an intent's object or body: it must be a JSON object.
func marshalObject(v any, what string) (string, error) {
	if v == nil {
		return "", Permanentf("%s is nil", what)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "", Permanentf("cannot serialize %s: %v", what, err)
	}
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r') {
		i++
	}
	if i == len(data) || data[i] != '{' {
		return "", Permanentf("%s is not a JSON object", what)
	}
	return string(data), nil
}

// IntentsJSON is the test-case shape of a list of intents (see Intent.JSON).
func IntentsJSON(intents []Intent) ([]any, error) {
	out := make([]any, 0, len(intents))
	for i, in := range intents {
		if in == nil {
			return nil, fmt.Errorf("intent #%d is nil", i)
		}
		j, err := in.JSON()
		if err != nil {
			return nil, fmt.Errorf("intent #%d: %w", i, err)
		}
		out = append(out, j)
	}
	return out, nil
}
