//go:build wasip1

package kubewasm

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	handler "kubewasm.dev/bindings/exports/export_kubewasm_plugin_handler"
	_ "kubewasm.dev/bindings/exports/wit_exports" // the //go:wasmexport functions
	wit "kubewasm.dev/bindings/imports/kubewasm_plugin_types"
)

func init() {
	// No automatic GC cycles: one could start inside cabi_realloc (see gc.go).
	debug.SetGCPercent(-1)
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// collectGarbage runs a GC cycle when the heap holds more than the threshold. It runs at the
// start of an export, where calling imports (the clock) is allowed.
func collectGarbage() {
	metrics.Read(heapSample)
	if heapSample[0].Value.Kind() == metrics.KindUint64 && heapSample[0].Value.Uint64() >= gcThreshold {
		runtime.GC()
	}
}

// Export makes p the component's plugin: call it from an init function of your main
// package.
//
//	func init() { kubewasm.Export(Provisioner{}) }
//	func main() {}
func Export[S any](p Plugin[S]) {
	handler.DescribeFunc = func(settings witTypes.Option[string]) witTypes.Result[wit.Manifest, string] {
		collectGarbage()
		m, err := CallDescribe(p, settings.SomeOr(""))
		if err != nil {
			return witTypes.Err[wit.Manifest, string](err.Error())
		}
		return witTypes.Ok[wit.Manifest, string](witManifest(m))
	}
	handler.HandleFunc = func(ev wit.Event, settings witTypes.Option[string]) witTypes.Result[[]wit.Intent, wit.HandleError] {
		collectGarbage()
		intents, err := CallHandle(p, eventOf(ev), settings.SomeOr(""))
		var out []wit.Intent
		if err == nil {
			out, err = witIntents(intents)
		}
		if err != nil {
			he := AsHandleError(err)
			return witTypes.Err[[]wit.Intent, wit.HandleError](wit.HandleError{Message: he.Message, Retry: he.Retry})
		}
		return witTypes.Ok[[]wit.Intent, wit.HandleError](out)
	}
}

func option(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func eventOf(e wit.Event) Event {
	ev := Event{WatchID: e.WatchId, Raw: e.Object}
	switch e.EventType {
	case wit.EventType_Added:
		ev.Type = Added
	case wit.EventType_Modified:
		ev.Type = Modified
	case wit.EventType_Deleted:
		ev.Type = Deleted
	default:
		ev.Type = Resync
	}
	if e.OldObject.IsSome() {
		old := e.OldObject.Some()
		ev.OldRaw = &old
	}
	return ev
}

func witResourceRef(r ResourceRef) wit.ResourceRef {
	if r.Resource != "" {
		return wit.MakeResourceRefResource(r.Resource)
	}
	return wit.MakeResourceRefKind(wit.TypeRef{ApiVersion: r.APIVersion, Kind: r.Kind})
}

func witManifest(m Manifest) wit.Manifest {
	out := wit.Manifest{Name: m.Name, Version: m.Version}
	for _, w := range m.Watches {
		out.Watches = append(out.Watches, wit.Watch{
			Id:            w.ID,
			Resource:      witResourceRef(w.Resource),
			Namespace:     option(w.Namespace),
			LabelSelector: option(w.LabelSelector),
			FieldSelector: option(w.FieldSelector),
			Fields:        append([]string{}, w.Fields...),
		})
	}
	for _, g := range m.Grants {
		wg := wit.Grant{
			ApiGroups:  append([]string{}, g.APIGroups...),
			Kinds:      append([]string{}, g.Kinds...),
			Namespaces: append([]string{}, g.Namespaces...),
			AllowForce: g.AllowForce,
		}
		for _, v := range g.Verbs {
			switch v {
			case VerbCreate:
				wg.Verbs = append(wg.Verbs, wit.Verb_Create)
			case VerbPatch:
				wg.Verbs = append(wg.Verbs, wit.Verb_Patch)
			case VerbPatchStatus:
				wg.Verbs = append(wg.Verbs, wit.Verb_PatchStatus)
			case VerbDelete:
				wg.Verbs = append(wg.Verbs, wit.Verb_Delete)
			}
		}
		out.Grants = append(out.Grants, wg)
	}
	for _, r := range m.Reads {
		out.Reads = append(out.Reads, wit.Read{Resource: witResourceRef(r.Resource), Fields: append([]string{}, r.Fields...)})
	}
	return out
}

func witRef(r ObjectRef) wit.ObjectRef {
	return wit.ObjectRef{ApiVersion: r.APIVersion, Kind: r.Kind, Namespace: option(r.Namespace), Name: r.Name}
}

func witIntents(intents []Intent) ([]wit.Intent, error) {
	out := make([]wit.Intent, 0, len(intents))
	for _, in := range intents {
		switch x := in.(type) {
		case *CreateIntent:
			object, err := marshalObject(x.Object, "created object")
			if err != nil {
				return nil, err
			}
			out = append(out, wit.MakeIntentCreate(wit.CreateIntent{
				Object: object, Force: x.IsForced, OwnedByTrigger: x.IsOwnedByTrigger,
			}))
		case *PatchIntent:
			body, err := marshalObject(x.Body, "patch body")
			if err != nil {
				return nil, err
			}
			strategy := wit.PatchStrategy_Apply
			if x.Strategy == Merge {
				strategy = wit.PatchStrategy_Merge
			}
			out = append(out, wit.MakeIntentPatch(wit.PatchIntent{
				Target: witRef(x.Ref), Body: body, Strategy: strategy, Status: x.IsStatus, Force: x.IsForced,
			}))
		case *DeleteIntent:
			d := wit.DeleteIntent{
				Target: witRef(x.Ref), Uid: option(x.WithUID), ResourceVersion: option(x.WithResourceVersion),
				Propagation: witTypes.None[wit.Propagation](),
			}
			switch x.WithPropagation {
			case Background:
				d.Propagation = witTypes.Some(wit.Propagation_Background)
			case Foreground:
				d.Propagation = witTypes.Some(wit.Propagation_Foreground)
			case Orphan:
				d.Propagation = witTypes.Some(wit.Propagation_Orphan)
			case "":
			default:
				return nil, Permanentf("unknown propagation %q (Background, Foreground or Orphan)", x.WithPropagation)
			}
			out = append(out, wit.MakeIntentDelete(d))
		default:
			return nil, Permanentf("unknown intent type %T", in)
		}
	}
	return out, nil
}
