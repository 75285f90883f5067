//go:build !wasip1

package host

import (
	"fmt"
	"strings"

	"kubewasm.dev/kubewasm/internal/fake"
)

func get(apiVersion, kind, namespace, name string) (string, bool, error) {
	text, found, msg := fake.Get(apiVersion, kind, namespace, name)
	if msg != "" {
		return "", false, hostError("get", kind, msg)
	}
	return text, found, nil
}

func list(apiVersion, kind, namespace, labelSelector string) ([]string, error) {
	match, err := ParseSelector(labelSelector)
	if err != nil {
		return nil, hostError("list", kind, "label selector: "+err.Error())
	}
	texts, msg := fake.List(apiVersion, kind, namespace, match)
	if msg != "" {
		return nil, hostError("list", kind, msg)
	}
	return texts, nil
}

// ParseSelector parses a Kubernetes label selector (k=v, k==v, k!=v, k, !k, k in (a,b),
// k notin (a,b), comma-separated) into a matcher. Native builds only: it is what the fake
// cluster of kwtest filters with; in the component the host evaluates selectors.
func ParseSelector(selector string) (func(labels map[string]string) bool, error) {
	var reqs []func(map[string]string) bool
	rest := strings.TrimSpace(selector)
	for rest != "" {
		var part string
		// Split on the next comma outside parentheses.
		depth, cut := 0, len(rest)
		for i, c := range rest {
			if c == '(' {
				depth++
			} else if c == ')' {
				depth--
			} else if c == ',' && depth == 0 {
				cut = i
				break
			}
		}
		part, rest = strings.TrimSpace(rest[:cut]), strings.TrimSpace(strings.TrimPrefix(rest[cut:], ","))
		req, err := parseRequirement(part)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, req)
	}
	return func(labels map[string]string) bool {
		for _, r := range reqs {
			if !r(labels) {
				return false
			}
		}
		return true
	}, nil
}

func parseRequirement(part string) (func(map[string]string) bool, error) {
	if part == "" {
		return nil, fmt.Errorf("empty requirement")
	}
	for _, op := range []string{"!=", "==", "="} {
		if k, v, ok := strings.Cut(part, op); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if k == "" {
				return nil, fmt.Errorf("%q: missing key", part)
			}
			if op == "!=" {
				return func(l map[string]string) bool { got, has := l[k]; return !has || got != v }, nil
			}
			return func(l map[string]string) bool { got, has := l[k]; return has && got == v }, nil
		}
	}
	fields := strings.Fields(part)
	if len(fields) == 1 {
		k := fields[0]
		if strings.HasPrefix(k, "!") {
			k = k[1:]
			return func(l map[string]string) bool { _, has := l[k]; return !has }, nil
		}
		return func(l map[string]string) bool { _, has := l[k]; return has }, nil
	}
	if len(fields) >= 2 && (fields[1] == "in" || fields[1] == "notin") {
		k, op := fields[0], fields[1]
		set := strings.TrimSpace(strings.Join(fields[2:], " "))
		if !strings.HasPrefix(set, "(") || !strings.HasSuffix(set, ")") {
			return nil, fmt.Errorf("%q: expected a (list)", part)
		}
		values := map[string]bool{}
		for _, v := range strings.Split(set[1:len(set)-1], ",") {
			values[strings.TrimSpace(v)] = true
		}
		if op == "in" {
			return func(l map[string]string) bool { got, has := l[k]; return has && values[got] }, nil
		}
		return func(l map[string]string) bool { got, has := l[k]; return !has || !values[got] }, nil
	}
	return nil, fmt.Errorf("%q is not a label requirement", part)
}
