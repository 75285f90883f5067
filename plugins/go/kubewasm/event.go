package kubewasm

import (
	"fmt"
	"reflect"
)

// EventType is why Handle was called: the informer callback it replaces.
type EventType string

const (
	// Added: the object appeared, or the host saw it for the first time (AddFunc).
	Added EventType = "added"
	// Modified: the object changed; the event holds the previous state too (UpdateFunc).
	Modified EventType = "modified"
	// Deleted: the object is gone; the event holds its last known state (DeleteFunc).
	Deleted EventType = "deleted"
	// Resync: periodic re-delivery of the current state (UpdateFunc with old == new).
	Resync EventType = "resync"
)

// Event is one change to one object. The objects are JSON text exactly as the API server
// serves them; decode them with Object/OldObject (into your own structs) or
// Unstructured/OldUnstructured.
type Event struct {
	Type EventType
	// WatchID is the Watch.ID of the watch that matched.
	WatchID string
	// Raw is the object as JSON.
	Raw string
	// OldRaw is the previous object as JSON (Modified events only); nil when absent.
	OldRaw *string
}

// NewEvent is an event from raw JSON text (what the host sends); oldObject is "" for none.
func NewEvent(t EventType, watchID, object, oldObject string) Event {
	ev := Event{Type: t, WatchID: watchID, Raw: object}
	if oldObject != "" {
		ev.OldRaw = &oldObject
	}
	return ev
}

// IsAdded reports an Added event.
func (e Event) IsAdded() bool { return e.Type == Added }

// IsModified reports a Modified event.
func (e Event) IsModified() bool { return e.Type == Modified }

// IsDeleted reports a Deleted event.
func (e Event) IsDeleted() bool { return e.Type == Deleted }

// IsResync reports a Resync event.
func (e Event) IsResync() bool { return e.Type == Resync }

// HasOldObject reports whether the event carries a previous object.
func (e Event) HasOldObject() bool { return e.OldRaw != nil }

// Unstructured is the object as an Unstructured. A permanent error unless it is a JSON
// object.
func (e Event) Unstructured() (Unstructured, error) { return parseObject(e.Raw, "object") }

// OldUnstructured is the previous object of a Modified event; found is false without one.
func (e Event) OldUnstructured() (u Unstructured, found bool, err error) {
	if e.OldRaw == nil {
		return nil, false, nil
	}
	u, err = parseObject(*e.OldRaw, "old object")
	return u, err == nil, err
}

// Object decodes the object into a typed value, the way client-go's
// runtime.DefaultUnstructuredConverter.FromUnstructured does: into is a pointer to your
// struct (json tags; unknown fields are ignored), or to an Unstructured. A malformed object
// is a permanent error.
//
//	var site ContentSite
//	if err := ev.Object(&site); err != nil {
//		return nil, err
//	}
func (e Event) Object(into any) error { return decodeObject(e.Raw, "object", into) }

// OldObject decodes the previous object of a Modified event like Object; found is false
// (and into untouched) without one.
func (e Event) OldObject(into any) (found bool, err error) {
	if e.OldRaw == nil {
		return false, nil
	}
	return true, decodeObject(*e.OldRaw, "old object", into)
}

func parseObject(text, what string) (Unstructured, error) {
	v, err := parseJSON([]byte(text))
	if err != nil {
		return nil, Permanentf("%s is not valid JSON: %v", what, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Permanentf("%s is not a JSON object", what)
	}
	return Unstructured(m), nil
}

func decodeObject(text, what string, into any) error {
	switch p := into.(type) {
	case *Unstructured:
		u, err := parseObject(text, what)
		if err == nil {
			*p = u
		}
		return err
	case *map[string]any:
		u, err := parseObject(text, what)
		if err == nil {
			*p = u
		}
		return err
	}
	if err := decodeInto([]byte(text), into); err != nil {
		return Permanentf("%s does not decode as %s: %v", what, typeName(into), err)
	}
	return nil
}

func typeName(into any) string {
	t := reflect.TypeOf(into)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "<nil>"
	}
	return fmt.Sprint(t)
}
