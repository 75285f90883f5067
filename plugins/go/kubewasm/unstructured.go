package kubewasm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unstructured is a Kubernetes object as plain JSON data, like client-go's
// unstructured.Unstructured.Object: map[string]any with nested map[string]any, []any,
// string, bool, nil, and numbers as int64 (integers) or float64 (the rest).
//
// The Get methods read common fields and never fail: a missing or mistyped field reads as
// its zero value. For anything else use the Nested functions (NestedString(u, "spec",
// "title") and friends), which take an Unstructured or any map[string]any.
type Unstructured map[string]any

// ParseUnstructured decodes a JSON object, keeping integers exact (int64; uint64 above
// MaxInt64) instead of encoding/json's float64.
func ParseUnstructured(data []byte) (Unstructured, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return Unstructured(m), nil
}

// ToUnstructured converts any JSON-encodable value (a struct with json tags, a map) into an
// Unstructured, the way client-go's DefaultUnstructuredConverter.ToUnstructured does.
func ToUnstructured(v any) (Unstructured, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ParseUnstructured(data)
}

// FromUnstructured decodes u into a typed value (a pointer to your struct), the way
// client-go's DefaultUnstructuredConverter.FromUnstructured does: through the json tags,
// unknown fields ignored.
func FromUnstructured(u map[string]any, into any) error {
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return decodeInto(data, into)
}

// Convert turns any JSON-encodable value (a nested field of an Unstructured, a struct) into a
// typed value through JSON: into is a pointer to your struct, or to an Unstructured.
//
//	var db DatabaseSpec
//	raw, _, _ := kubewasm.NestedFieldNoCopy(site, "spec", "database")
//	err := kubewasm.Convert(raw, &db)
func Convert(from any, into any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return decodeInto(data, into)
}

// decodeInto decodes JSON into `into`: number-preserving for *Unstructured, *map[string]any
// and *any, encoding/json otherwise.
func decodeInto(data []byte, into any) error {
	switch p := into.(type) {
	case *Unstructured:
		u, err := ParseUnstructured(data)
		if err != nil {
			return err
		}
		*p = u
		return nil
	case *map[string]any:
		u, err := ParseUnstructured(data)
		if err != nil {
			return err
		}
		*p = u
		return nil
	case *any:
		v, err := parseJSON(data)
		if err != nil {
			return err
		}
		*p = v
		return nil
	}
	return json.Unmarshal(data, into)
}

func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, fmt.Errorf("trailing characters after the JSON value")
	}
	return normalizeNumbers(v), nil
}

// normalizeNumbers turns json.Number into int64, uint64 (above MaxInt64) or float64.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
		return x
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u
			}
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
		return x
	}
	return v
}

// DeepCopy returns a copy sharing nothing with u.
func (u Unstructured) DeepCopy() Unstructured {
	if u == nil {
		return nil
	}
	return deepCopy(map[string]any(u)).(map[string]any)
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case Unstructured:
		return deepCopy(map[string]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out
	case []string:
		return append([]string(nil), x...)
	}
	return v
}

// MarshalJSON encodes the object (nil as {}).
func (u Unstructured) MarshalJSON() ([]byte, error) {
	if u == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]any(u))
}

// UnmarshalJSON decodes a JSON object, keeping integers exact.
func (u *Unstructured) UnmarshalJSON(data []byte) error {
	v, err := ParseUnstructured(data)
	if err != nil {
		return err
	}
	*u = v
	return nil
}

func (u Unstructured) str(fields ...string) string {
	s, _, _ := NestedString(u, fields...)
	return s
}

// GetAPIVersion returns apiVersion.
func (u Unstructured) GetAPIVersion() string { return u.str("apiVersion") }

// GetKind returns kind.
func (u Unstructured) GetKind() string { return u.str("kind") }

// GetName returns metadata.name.
func (u Unstructured) GetName() string { return u.str("metadata", "name") }

// GetNamespace returns metadata.namespace.
func (u Unstructured) GetNamespace() string { return u.str("metadata", "namespace") }

// GetUID returns metadata.uid.
func (u Unstructured) GetUID() string { return u.str("metadata", "uid") }

// GetResourceVersion returns metadata.resourceVersion.
func (u Unstructured) GetResourceVersion() string { return u.str("metadata", "resourceVersion") }

// GetGeneration returns metadata.generation, 0 when absent (NestedInt64 tells them apart).
func (u Unstructured) GetGeneration() int64 {
	g, _, _ := NestedInt64(u, "metadata", "generation")
	return g
}

// GetLabels returns metadata.labels (string values only); nil when there are none.
func (u Unstructured) GetLabels() map[string]string {
	m, _, _ := NestedStringMap(u, "metadata", "labels")
	return m
}

// GetAnnotations returns metadata.annotations (string values only); nil when there are none.
func (u Unstructured) GetAnnotations() map[string]string {
	m, _, _ := NestedStringMap(u, "metadata", "annotations")
	return m
}

// GetLabel returns metadata.labels[key].
func (u Unstructured) GetLabel(key string) (string, bool) {
	s, ok, err := NestedString(u, "metadata", "labels", key)
	return s, ok && err == nil
}

// GetAnnotation returns metadata.annotations[key].
func (u Unstructured) GetAnnotation(key string) (string, bool) {
	s, ok, err := NestedString(u, "metadata", "annotations", key)
	return s, ok && err == nil
}

// GetDeletionTimestamp returns metadata.deletionTimestamp ("" when not set).
func (u Unstructured) GetDeletionTimestamp() string { return u.str("metadata", "deletionTimestamp") }

// IsBeingDeleted reports whether metadata.deletionTimestamp is set (not null): the object is
// going away and only finalizers hold it.
func (u Unstructured) IsBeingDeleted() bool {
	v, ok, _ := NestedFieldNoCopy(u, "metadata", "deletionTimestamp")
	return ok && v != nil
}

// RequireName returns metadata.name, or a permanent error when it is missing or empty.
func (u Unstructured) RequireName() (string, error) {
	if n := u.GetName(); n != "" {
		return n, nil
	}
	return "", Permanentf("object has no metadata.name")
}

// Ref is the ObjectRef of this object (see RefOf).
func (u Unstructured) Ref() (ObjectRef, error) { return RefOf(u) }

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case Unstructured:
		return map[string]any(m), true
	}
	return nil, false
}

func jsonPath(fields []string) string { return "." + strings.Join(fields, ".") }

// NestedFieldNoCopy returns the value at the path of fields, without copying it. found is
// false when a field on the way is missing; err is set when a step is not an object.
func NestedFieldNoCopy(obj map[string]any, fields ...string) (any, bool, error) {
	var v any = obj
	for i, f := range fields {
		if v == nil {
			return nil, false, nil
		}
		m, ok := asMap(v)
		if !ok {
			return nil, false, fmt.Errorf("%v accessor error: %v is of the type %T, expected map[string]interface{}",
				jsonPath(fields[:i+1]), v, v)
		}
		if v, ok = m[f]; !ok {
			return nil, false, nil
		}
	}
	return v, true, nil
}

// NestedFieldCopy is NestedFieldNoCopy with a deep copy of the value.
func NestedFieldCopy(obj map[string]any, fields ...string) (any, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return nil, ok, err
	}
	return deepCopy(v), true, nil
}

func typeErr(fields []string, v any, want string) error {
	return fmt.Errorf("%v accessor error: %v is of the type %T, expected %s", jsonPath(fields), v, v, want)
}

// NestedString returns the string at the path; err when the value is not a string.
func NestedString(obj map[string]any, fields ...string) (string, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return "", ok, err
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, typeErr(fields, v, "string")
	}
	return s, true, nil
}

// NestedBool returns the bool at the path; err when the value is not a bool.
func NestedBool(obj map[string]any, fields ...string) (bool, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return false, ok, err
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, false, typeErr(fields, v, "bool")
	}
	return b, true, nil
}

// NestedInt64 returns the integer at the path; err when the value is not an integer that
// fits an int64.
func NestedInt64(obj map[string]any, fields ...string) (int64, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return 0, ok, err
	}
	switch n := v.(type) {
	case int64:
		return n, true, nil
	case int:
		return int64(n), true, nil
	case int32:
		return int64(n), true, nil
	case uint32:
		return int64(n), true, nil
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n), true, nil
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true, nil
		}
	}
	return 0, false, typeErr(fields, v, "int64")
}

// NestedFloat64 returns the number at the path as a float64; err when it is not a number.
func NestedFloat64(obj map[string]any, fields ...string) (float64, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return 0, ok, err
	}
	switch n := v.(type) {
	case float64:
		return n, true, nil
	case float32:
		return float64(n), true, nil
	case int64:
		return float64(n), true, nil
	case int:
		return float64(n), true, nil
	case uint64:
		return float64(n), true, nil
	case json.Number:
		if f, err := n.Float64(); err == nil {
			return f, true, nil
		}
	}
	return 0, false, typeErr(fields, v, "float64")
}

// NestedMap returns a deep copy of the object at the path; err when it is not an object.
func NestedMap(obj map[string]any, fields ...string) (map[string]any, bool, error) {
	m, ok, err := NestedMapNoCopy(obj, fields...)
	if !ok || err != nil {
		return nil, ok, err
	}
	return deepCopy(m).(map[string]any), true, nil
}

// NestedMapNoCopy returns the object at the path without copying it.
func NestedMapNoCopy(obj map[string]any, fields ...string) (map[string]any, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return nil, ok, err
	}
	m, isMap := asMap(v)
	if !isMap {
		return nil, false, typeErr(fields, v, "map[string]interface{}")
	}
	return m, true, nil
}

// NestedSlice returns a deep copy of the list at the path; err when it is not a list.
func NestedSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return nil, ok, err
	}
	s, isSlice := v.([]any)
	if !isSlice {
		return nil, false, typeErr(fields, v, "[]interface{}")
	}
	return deepCopy(s).([]any), true, nil
}

// NestedStringMap returns the object at the path as map[string]string; err when it is not
// an object or a value is not a string.
func NestedStringMap(obj map[string]any, fields ...string) (map[string]string, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return nil, ok, err
	}
	if sm, isSM := v.(map[string]string); isSM {
		return deepCopy(sm).(map[string]string), true, nil
	}
	m, isMap := asMap(v)
	if !isMap {
		return nil, false, typeErr(fields, v, "map[string]string")
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, isStr := e.(string)
		if !isStr {
			return nil, false, fmt.Errorf("%v accessor error: contains non-string value %v of type %T in the map under key %q",
				jsonPath(fields), e, e, k)
		}
		out[k] = s
	}
	return out, true, nil
}

// NestedStringSlice returns the list at the path as []string; err when it is not a list of
// strings.
func NestedStringSlice(obj map[string]any, fields ...string) ([]string, bool, error) {
	v, ok, err := NestedFieldNoCopy(obj, fields...)
	if !ok || err != nil {
		return nil, ok, err
	}
	if ss, isSS := v.([]string); isSS {
		return append([]string(nil), ss...), true, nil
	}
	s, isSlice := v.([]any)
	if !isSlice {
		return nil, false, typeErr(fields, v, "[]string")
	}
	out := make([]string, 0, len(s))
	for _, e := range s {
		str, isStr := e.(string)
		if !isStr {
			return nil, false, fmt.Errorf("%v accessor error: contains non-string value %v of type %T in the slice",
				jsonPath(fields), e, e)
		}
		out = append(out, str)
	}
	return out, true, nil
}

// SetNestedField sets the value at the path, creating objects on the way; err when a step
// exists and is not an object.
func SetNestedField(obj map[string]any, value any, fields ...string) error {
	if len(fields) == 0 {
		return fmt.Errorf("SetNestedField: no fields")
	}
	m := obj
	for i, f := range fields[:len(fields)-1] {
		next, ok := m[f]
		if !ok || next == nil {
			child := map[string]any{}
			m[f] = child
			m = child
			continue
		}
		child, isMap := asMap(next)
		if !isMap {
			return fmt.Errorf("value cannot be set because %v is not a map[string]interface{}", jsonPath(fields[:i+1]))
		}
		m = child
	}
	m[fields[len(fields)-1]] = value
	return nil
}

// RemoveNestedField removes the value at the path, if there is one.
func RemoveNestedField(obj map[string]any, fields ...string) {
	if len(fields) == 0 {
		return
	}
	m := obj
	for _, f := range fields[:len(fields)-1] {
		child, ok := asMap(m[f])
		if !ok {
			return
		}
		m = child
	}
	delete(m, fields[len(fields)-1])
}
