package kubewasm

import (
	"fmt"
	"slices"
)

// ResourceRef is what a watch (or a read) selects: a kind (APIVersion + Kind) or a resource
// argument as kubectl takes it (Resource: "seldondeployments.v1.machinelearning.seldon.io",
// "deployments.apps", "configmaps"). Exactly one form is set.
type ResourceRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Resource   string `json:"resource,omitempty"`
}

// KindRef selects a kind, e.g. KindRef("mongodb.com/v1", "MongoDB").
func KindRef(apiVersion, kind string) ResourceRef {
	return ResourceRef{APIVersion: apiVersion, Kind: kind}
}

// ResourceArg selects a resource argument, e.g. "seldondeployments.v1.machinelearning.seldon.io".
func ResourceArg(resource string) ResourceRef { return ResourceRef{Resource: resource} }

// IsKind reports whether the reference is by kind.
func (r ResourceRef) IsKind() bool { return r.Resource == "" }

// Watch is one kind of object the plugin receives events for; like an informer's
// ListOptions, without the client: the host runs one shared watcher per resource.
type Watch struct {
	// ID is a name the plugin chooses; events carry it (Event.WatchID). Unique per plugin.
	ID       string      `json:"id"`
	Resource ResourceRef `json:"resource"`
	// Namespace: only objects in this namespace. "": all namespaces (or cluster-scoped).
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector, e.g. "app=web,tier!=db". "": none.
	LabelSelector string `json:"labelSelector,omitempty"`
	// FieldSelector, e.g. "metadata.name=main". "": none.
	FieldSelector string `json:"fieldSelector,omitempty"`
	// Fields the plugin uses (its projection), e.g. "spec.database", "status.phase",
	// "metadata.labels": events and reads of the kind then carry only these and the object's
	// identity (apiVersion, kind, metadata.name, namespace, uid, resourceVersion). Empty:
	// whole objects. See WithFields.
	Fields []string `json:"fields,omitempty"`
}

// WatchKind watches a kind, e.g. WatchKind("dbs", "mongodb.com/v1", "MongoDB").
func WatchKind(id, apiVersion, kind string) Watch {
	return Watch{ID: id, Resource: KindRef(apiVersion, kind)}
}

// WatchResource watches a resource argument, e.g.
// WatchResource("models", "seldondeployments.v1.machinelearning.seldon.io").
func WatchResource(id, resource string) Watch {
	return Watch{ID: id, Resource: ResourceArg(resource)}
}

// InNamespace restricts the watch to one namespace ("" keeps all namespaces).
func (w Watch) InNamespace(namespace string) Watch { w.Namespace = namespace; return w }

// WithLabelSelector restricts the watch to objects matching a label selector.
func (w Watch) WithLabelSelector(selector string) Watch { w.LabelSelector = selector; return w }

// WithFieldSelector restricts the watch to objects matching a field selector.
func (w Watch) WithFieldSelector(selector string) Watch { w.FieldSelector = selector; return w }

// WithFields declares fields the plugin uses (added to those declared before): its
// projection, like a cache transform the host applies for it. Each is a path of keys joined
// by '.'; a path keeps the whole value it reaches, a path crossing a list applies to every
// element ("spec.containers.image"), and "metadata" alone is a metadata-only projection. A
// key containing '.' (a label) is kept through its parent ("metadata.labels"). The identity
// is always kept.
func (w Watch) WithFields(fields ...string) Watch {
	w.Fields = append(slices.Clip(w.Fields), fields...)
	return w
}

// Read is a kind the plugin reads with host.Get/host.List without watching it (an extra
// lister), and the fields it uses there (Fields, as Watch.Fields; empty: whole objects).
type Read struct {
	Resource ResourceRef `json:"resource"`
	Fields   []string    `json:"fields,omitempty"`
}

// ReadKind reads a kind, e.g. ReadKind("v1", "Secret").
func ReadKind(apiVersion, kind string) Read { return Read{Resource: KindRef(apiVersion, kind)} }

// ReadResource reads a resource argument, e.g. ReadResource("deployments.apps").
func ReadResource(resource string) Read { return Read{Resource: ResourceArg(resource)} }

// WithFields declares fields the plugin uses, as Watch.WithFields does.
func (r Read) WithFields(fields ...string) Read {
	r.Fields = append(slices.Clip(r.Fields), fields...)
	return r
}

// Verb is what a grant allows.
type Verb string

const (
	// VerbCreate allows create intents (server-side apply of a whole object).
	VerbCreate Verb = "create"
	// VerbPatch allows patch intents on the main resource.
	VerbPatch Verb = "patch"
	// VerbPatchStatus allows patch intents on the status subresource.
	VerbPatchStatus Verb = "patch-status"
	// VerbDelete allows delete intents.
	VerbDelete Verb = "delete"
)

// Grant is permission to write some objects: the plugin's RBAC. Every intent must fall inside
// a grant, or the host applies none of the call's intents.
type Grant struct {
	// APIGroups: "" for the core group, "*" for any.
	APIGroups []string `json:"apiGroups"`
	// Kinds: "*" for any kind in those groups.
	Kinds []string `json:"kinds"`
	// Namespaces the grant covers; empty: every namespace and cluster-scoped objects.
	Namespaces []string `json:"namespaces,omitempty"`
	Verbs      []Verb   `json:"verbs"`
	// AllowForce lets intents under this grant set Force.
	AllowForce bool `json:"allowForce,omitempty"`
}

// GrantOn is a grant on one kind of one API group ("" for the core group); add verbs with
// Create, Patch, PatchStatus, Delete.
func GrantOn(apiGroup, kind string) Grant {
	return Grant{APIGroups: []string{apiGroup}, Kinds: []string{kind}}
}

func (g Grant) withVerb(v Verb) Grant {
	if slices.Contains(g.Verbs, v) {
		return g
	}
	g.Verbs = append(slices.Clip(g.Verbs), v)
	return g
}

// Create allows create intents.
func (g Grant) Create() Grant { return g.withVerb(VerbCreate) }

// Patch allows patch intents on the main resource.
func (g Grant) Patch() Grant { return g.withVerb(VerbPatch) }

// PatchStatus allows patch intents on the status subresource.
func (g Grant) PatchStatus() Grant { return g.withVerb(VerbPatchStatus) }

// Delete allows delete intents.
func (g Grant) Delete() Grant { return g.withVerb(VerbDelete) }

// Group also covers this API group.
func (g Grant) Group(apiGroup string) Grant {
	g.APIGroups = append(slices.Clip(g.APIGroups), apiGroup)
	return g
}

// Kind also covers this kind.
func (g Grant) Kind(kind string) Grant { g.Kinds = append(slices.Clip(g.Kinds), kind); return g }

// InNamespace restricts the grant to (or adds) a namespace; "" leaves it unchanged.
func (g Grant) InNamespace(namespace string) Grant {
	if namespace == "" {
		return g
	}
	g.Namespaces = append(slices.Clip(g.Namespaces), namespace)
	return g
}

// WithForce lets intents under this grant set Force.
func (g Grant) WithForce() Grant { g.AllowForce = true; return g }

// Covers reports whether the grant allows verb on kind in apiGroup and namespace ("" for
// cluster-scoped), forced or not.
func (g Grant) Covers(verb Verb, apiGroup, kind, namespace string, force bool) bool {
	anyOr := func(list []string, v string) bool {
		return slices.Contains(list, "*") || slices.Contains(list, v)
	}
	return slices.Contains(g.Verbs, verb) &&
		anyOr(g.APIGroups, apiGroup) &&
		anyOr(g.Kinds, kind) &&
		(len(g.Namespaces) == 0 || (namespace != "" && slices.Contains(g.Namespaces, namespace))) &&
		(!force || g.AllowForce)
}

// Manifest is what a plugin is and needs, returned by Describe: the informers it would
// start (Watches), its RBAC (Grants) and the extra listers it reads from (Reads).
type Manifest struct {
	// Name: letters, digits and '-', at most 63 characters; the field manager of its writes
	// is kubewasm-<Name>.
	Name    string  `json:"name"`
	Version string  `json:"version"`
	Watches []Watch `json:"watches"`
	Grants  []Grant `json:"grants"`
	Reads   []Read  `json:"reads,omitempty"`
}

// NewManifest is a manifest with no watches, grants or reads yet.
func NewManifest(name, version string) Manifest { return Manifest{Name: name, Version: version} }

// Watch adds a watch built with WatchKind or WatchResource.
func (m Manifest) Watch(w Watch) Manifest {
	m.Watches = append(slices.Clip(m.Watches), w)
	return m
}

// WatchKind adds a watch on a kind in all namespaces.
func (m Manifest) WatchKind(id, apiVersion, kind string) Manifest {
	return m.Watch(WatchKind(id, apiVersion, kind))
}

// WatchResource adds a watch on a resource argument in all namespaces.
func (m Manifest) WatchResource(id, resource string) Manifest {
	return m.Watch(WatchResource(id, resource))
}

// Grant adds a grant.
func (m Manifest) Grant(g Grant) Manifest {
	m.Grants = append(slices.Clip(m.Grants), g)
	return m
}

// Read adds a read built with ReadKind or ReadResource (and its fields).
func (m Manifest) Read(r Read) Manifest {
	m.Reads = append(slices.Clip(m.Reads), r)
	return m
}

// ReadKind declares a kind the plugin reads with host.Get/host.List without watching it
// (whole objects).
func (m Manifest) ReadKind(apiVersion, kind string) Manifest {
	return m.Read(ReadKind(apiVersion, kind))
}

// ReadResource declares a resource argument the plugin reads without watching it (whole
// objects).
func (m Manifest) ReadResource(resource string) Manifest {
	return m.Read(ReadResource(resource))
}

// Validate checks what the host checks on load: the name's shape, at least one watch,
// unique non-empty watch ids.
func (m Manifest) Validate() error {
	nameOK := m.Name != "" && len(m.Name) <= 63
	for _, c := range m.Name {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			nameOK = false
		}
	}
	if !nameOK {
		return fmt.Errorf("plugin name %q must be 1-63 letters, digits or '-'", m.Name)
	}
	if len(m.Watches) == 0 {
		return fmt.Errorf("plugin %s declares no watches", m.Name)
	}
	seen := map[string]bool{}
	for _, w := range m.Watches {
		if w.ID == "" {
			return fmt.Errorf("a watch has an empty id")
		}
		if seen[w.ID] {
			return fmt.Errorf("watch id %q is declared twice", w.ID)
		}
		seen[w.ID] = true
		if (w.Resource.Resource == "") == (w.Resource.Kind == "") {
			return fmt.Errorf("watch %q needs either a kind (with its apiVersion) or a resource", w.ID)
		}
	}
	return nil
}

// Permits reports (nil) whether the grants allow intent, as the host checks it; the error
// names what is missing. Use it in tests to keep grants and intents in step.
func (m Manifest) Permits(intent Intent) error {
	target, err := intent.Target()
	if err != nil {
		return err
	}
	verb, force := intent.Verb(), intent.Forced()
	group := GroupOf(target.APIVersion)
	for _, g := range m.Grants {
		if g.Covers(verb, group, target.Kind, target.Namespace, force) {
			return nil
		}
	}
	forced, ns := "", target.Namespace
	if force {
		forced = " (forced)"
	}
	if ns == "" {
		ns = "<cluster>"
	}
	return fmt.Errorf("no grant allows %s%s on %s %s in namespace %s", verb, forced, target.APIVersion, target.Kind, ns)
}
