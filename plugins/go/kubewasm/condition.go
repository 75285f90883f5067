package kubewasm

import (
	"time"
)

// Condition is a status condition in the Kubernetes convention (metav1.Condition).
//
//	c := kubewasm.NewCondition("Ready", true).
//		WithReason("ChildrenApplied").
//		WithMessage("database and service requested").
//		ObservedGenerationOf(site).
//		TransitionedFrom(site)
type Condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	// Reason is a CamelCase machine-readable reason.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the metadata.generation the condition was computed from.
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when the status last changed (RFC 3339).
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// NewCondition is a condition with status "True" or "False".
func NewCondition(conditionType string, status bool) Condition {
	s := "False"
	if status {
		s = "True"
	}
	return Condition{Type: conditionType, Status: s}
}

// UnknownCondition is a condition with status "Unknown".
func UnknownCondition(conditionType string) Condition {
	return Condition{Type: conditionType, Status: "Unknown"}
}

// WithReason sets the reason.
func (c Condition) WithReason(reason string) Condition { c.Reason = reason; return c }

// WithMessage sets the message.
func (c Condition) WithMessage(message string) Condition { c.Message = message; return c }

// ObservedGenerationOf sets ObservedGeneration from obj's metadata.generation, if it has one.
func (c Condition) ObservedGenerationOf(obj map[string]any) Condition {
	if g, ok, err := NestedInt64(obj, "metadata", "generation"); ok && err == nil {
		c.ObservedGeneration = &g
	} else {
		c.ObservedGeneration = nil
	}
	return c
}

// TransitionedFrom sets LastTransitionTime: the time of the same-type condition in obj's
// status.conditions when its status is unchanged (so re-applying the status is a no-op),
// the current time otherwise.
func (c Condition) TransitionedFrom(obj map[string]any) Condition {
	c.LastTransitionTime = ""
	if list, ok, _ := NestedFieldNoCopy(obj, "status", "conditions"); ok {
		items, _ := list.([]any)
		for _, item := range items {
			m, isMap := asMap(item)
			if !isMap {
				continue
			}
			if t, _ := m["type"].(string); t != c.Type {
				continue
			}
			if s, _ := m["status"].(string); s == c.Status {
				c.LastTransitionTime, _ = m["lastTransitionTime"].(string)
			}
			break
		}
	}
	if c.LastTransitionTime == "" {
		c.LastTransitionTime = Now()
	}
	return c
}

// Map is the condition as JSON data, to put into a status.
func (c Condition) Map() map[string]any {
	out := map[string]any{"type": c.Type, "status": c.Status}
	if c.Reason != "" {
		out["reason"] = c.Reason
	}
	if c.Message != "" {
		out["message"] = c.Message
	}
	if c.ObservedGeneration != nil {
		out["observedGeneration"] = *c.ObservedGeneration
	}
	if c.LastTransitionTime != "" {
		out["lastTransitionTime"] = c.LastTransitionTime
	}
	return out
}

// Now is the current UTC time in RFC 3339 with second precision (2026-01-02T03:04:05Z), the
// format of Kubernetes timestamps. In the host it is the wall clock WASI gives the plugin.
func Now() string { return time.Now().UTC().Format(time.RFC3339) }

// OwnerReference is an entry of metadata.ownerReferences. Usually you do not need it:
// Create(obj).OwnedByTrigger() asks the host for a controller reference to the triggering
// object. Use it to point at another owner.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// OwnerReferenceTo is a plain (non-controller) reference to owner, which must have
// apiVersion, kind, metadata.name and metadata.uid (a permanent error otherwise).
func OwnerReferenceTo(owner map[string]any) (OwnerReference, error) {
	u := Unstructured(owner)
	r := OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID()}
	for _, f := range []struct{ v, what string }{
		{r.APIVersion, "apiVersion"}, {r.Kind, "kind"}, {r.Name, "metadata.name"}, {r.UID, "metadata.uid"},
	} {
		if f.v == "" {
			return OwnerReference{}, Permanentf("owner has no %s", f.what)
		}
	}
	return r, nil
}

// ControllerReferenceTo is a controller reference to owner (controller and
// blockOwnerDeletion true), like metav1.NewControllerRef.
func ControllerReferenceTo(owner map[string]any) (OwnerReference, error) {
	r, err := OwnerReferenceTo(owner)
	if err != nil {
		return r, err
	}
	t := true
	r.Controller, r.BlockOwnerDeletion = &t, &t
	return r, nil
}

// Map is the reference as JSON data.
func (r OwnerReference) Map() map[string]any {
	out := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": r.UID}
	if r.Controller != nil {
		out["controller"] = *r.Controller
	}
	if r.BlockOwnerDeletion != nil {
		out["blockOwnerDeletion"] = *r.BlockOwnerDeletion
	}
	return out
}

// AddTo adds the reference to obj's metadata.ownerReferences, replacing one with the same
// uid. A permanent error when metadata or metadata.ownerReferences has the wrong shape.
func (r OwnerReference) AddTo(obj map[string]any) error {
	meta, ok := asMap(obj["metadata"])
	if obj["metadata"] == nil {
		meta, ok = map[string]any{}, true
		obj["metadata"] = meta
	}
	if !ok {
		return Permanentf("metadata is not an object")
	}
	var refs []any
	switch v := meta["ownerReferences"].(type) {
	case nil:
	case []any:
		refs = v
	default:
		return Permanentf("metadata.ownerReferences is not a list")
	}
	kept := refs[:0:0]
	for _, item := range refs {
		if m, isMap := asMap(item); isMap && m["uid"] == r.UID {
			continue
		}
		kept = append(kept, item)
	}
	meta["ownerReferences"] = append(kept, r.Map())
	return nil
}

// IsOwnedBy reports whether obj has an owner reference to the object with uid ownerUID.
func IsOwnedBy(obj map[string]any, ownerUID string) bool {
	list, ok, _ := NestedFieldNoCopy(obj, "metadata", "ownerReferences")
	if !ok {
		return false
	}
	items, _ := list.([]any)
	for _, item := range items {
		if m, isMap := asMap(item); isMap && m["uid"] == ownerUID {
			return true
		}
	}
	return false
}
