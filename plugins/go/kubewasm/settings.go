package kubewasm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Defaulter is implemented (on the pointer) by settings types with defaults other than
// their zero values. Default runs on a zero value before the settings file is decoded over
// it, so a field the file does not mention keeps its default, nested structs included (like
// serde's #[serde(default)]).
//
//	func (s *Settings) Default() { s.Interval = "30s"; s.Port = "metrics" }
type Defaulter interface {
	Default()
}

// DecodeSettings decodes the settings JSON the host passes (the NAME.yaml beside NAME.wasm,
// converted to JSON) into S. "" and "null" give the defaults (see Defaulter). Decoding is
// strict, unlike plain encoding/json: unknown fields, fields whose case differs from the
// json tag, duplicate fields and trailing data are errors, as with the Rust SDK's
// deny_unknown_fields settings; so is null for a field that is not a pointer (Option) or an
// interface.
func DecodeSettings[S any](text string) (S, error) {
	var s S
	if d, ok := any(&s).(Defaulter); ok {
		d.Default()
	}
	trimmed := strings.TrimSpace(text)
	if trimmed == "" || trimmed == "null" {
		return s, nil
	}
	if err := DecodeStrict([]byte(trimmed), &s); err != nil {
		return s, err
	}
	return s, nil
}

// DecodeStrict decodes JSON into a pointer like json.Unmarshal, but refuses unknown fields
// (exact case), duplicate fields and trailing data. Values already in *into are kept for
// fields the JSON does not mention.
func DecodeStrict(data []byte, into any) error {
	t := reflect.TypeOf(into)
	if t == nil || t.Kind() != reflect.Pointer {
		return fmt.Errorf("DecodeStrict needs a pointer, got %T", into)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := strictWalk(dec, t.Elem(), ""); err != nil {
		return err
	}
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return fmt.Errorf("trailing characters after the JSON value")
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(into)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// strictWalk reads one JSON value from dec and checks its object keys against t.
func strictWalk(dec *json.Decoder, t reflect.Type, path string) error {
	// null only for pointers (Option) and interfaces: encoding/json would silently keep the
	// default of a string, number, struct, map or slice field.
	nullable := t == nil || t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t, nullable = nil, true // custom decoding: only check syntax
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil && !nullable && path != "" {
		return fmt.Errorf("`%s`: null is not a %s (use a pointer field for an optional value)", path, t)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar: json.Unmarshal checks its type
	}
	switch delim {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := strictWalk(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		checkKeys := false
		if t != nil && t.Kind() == reflect.Struct {
			fields, checkKeys = jsonFields(t), true
		} else if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := keyTok.(string)
			at := key
			if path != "" {
				at = path + "." + key
			}
			if seen[key] && checkKeys { // in maps the last one wins, as in serde
				return fmt.Errorf("duplicate field `%s`", at)
			}
			seen[key] = true
			ft := elem
			if checkKeys {
				var known bool
				if ft, known = fields[key]; !known {
					return fmt.Errorf("unknown field `%s`, %s", at, expected(fields))
				}
			}
			if err := strictWalk(dec, ft, at); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// jsonFields are the JSON names of a struct's fields, as encoding/json sees them (embedded
// structs without a tag are flattened).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// expected says which fields there are, in serde's words (an empty list would read
// "expected one of " with nothing after it).
func expected(fields map[string]reflect.Type) string {
	list := make([]string, 0, len(fields))
	for k := range fields {
		list = append(list, "`"+k+"`")
	}
	sort.Strings(list)
	switch len(list) {
	case 0:
		return "there are no fields"
	case 1:
		return "expected " + list[0]
	case 2:
		return "expected " + list[0] + " or " + list[1]
	}
	return "expected one of " + strings.Join(list, ", ")
}
