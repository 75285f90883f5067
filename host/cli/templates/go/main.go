// Command {{name}} is a kubewasm plugin: every ConfigMap labelled kubewasm.dev/copy: "true"
// gets a copy named <name>-<suffix> in its namespace, annotated
// kubewasm.dev/copied-from: <ns>/<name> and owned by the original (so it is
// garbage-collected with it). The copy carries no labels, so it is not copied again.
package main

import (
	"kubewasm.dev/kubewasm"
)

// Name is the plugin's name in its manifest: the file name of its component.
const Name = "{{name}}"

// WatchID is the id of the ConfigMap watch (events carry it).
const WatchID = "configmaps"

// Selector chooses the ConfigMaps to copy.
const Selector = "kubewasm.dev/copy=true"

// CopiedFrom is the annotation naming the original.
const CopiedFrom = "kubewasm.dev/copied-from"

// Settings is {{name}}.yaml; every field is optional.
type Settings struct {
	// Suffix: the copy of NAME is called NAME-<suffix>.
	Suffix string `json:"suffix"`
}

// Default sets the defaults the settings file overrides.
func (s *Settings) Default() { s.Suffix = "copy" }

// Copier is the plugin.
type Copier struct{}

func init() { kubewasm.Export(Copier{}) }

func main() {}

// Describe watches labelled ConfigMaps and may create ConfigMaps.
func (Copier) Describe(s Settings) (kubewasm.Manifest, error) {
	return kubewasm.NewManifest(Name, "0.1.0").
		Watch(kubewasm.WatchKind(WatchID, "v1", "ConfigMap").WithLabelSelector(Selector)). // what to receive
		Grant(kubewasm.GrantOn("", "ConfigMap").Create()), nil // what it may write
}

// Handle asks for an annotated copy of every live ConfigMap; nothing on deletion.
func (Copier) Handle(ev kubewasm.Event, s Settings) ([]kubewasm.Intent, error) {
	if ev.IsDeleted() {
		return nil, nil // the copy is owned by the original: GC removes it
	}
	cm, err := ev.Unstructured() // malformed JSON: a permanent error
	if err != nil {
		return nil, err
	}
	if cm.IsBeingDeleted() {
		return nil, nil
	}
	name, err := cm.RequireName()
	if err != nil {
		return nil, err
	}
	namespace := cm.GetNamespace()
	if namespace == "" {
		return nil, kubewasm.Permanentf("ConfigMap has no metadata.namespace")
	}
	copyName := name + "-" + s.Suffix
	kubewasm.Log.Infof("copying ConfigMap %s/%s to %s", namespace, name, copyName)
	data, ok := cm["data"].(map[string]any)
	if !ok {
		data = map[string]any{}
	}
	return []kubewasm.Intent{kubewasm.Create(kubewasm.Unstructured{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":        copyName,
			"namespace":   namespace,
			"annotations": map[string]any{CopiedFrom: namespace + "/" + name},
		},
		"data": data,
	}).OwnedByTrigger()}, nil
}
