package kubewasm

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Plugin is a kubewasm plugin with settings of type S (your struct, decoded strictly from
// NAME.yaml, see DecodeSettings; struct{} for none; Unstructured for free-form settings).
//
// It replaces a controller's setup and its event handlers: Describe says what to watch and
// what may be written (once per load); Handle turns one event into writes (for every event,
// on a fresh or a reused instance). Both get the same settings. Plugins are stateless:
// state lives in the cluster.
type Plugin[S any] interface {
	// Describe returns the manifest: name, version, watches, grants and reads. An error
	// rejects the plugin.
	Describe(settings S) (Manifest, error)
	// Handle returns the writes to make for one event, in order. The host checks them all
	// against the grants and applies them, or none if any falls outside. Return a
	// Permanent error for input retrying cannot fix; any other error is retried.
	Handle(ev Event, settings S) ([]Intent, error)
}

// CallDescribe runs Describe the way the host does: settings JSON in ("" for no file),
// strict settings decoding, manifest validation. Use it in tests.
func CallDescribe[S any](p Plugin[S], settings string) (m Manifest, err error) {
	s, err := DecodeSettings[S](settings)
	if err != nil {
		return Manifest{}, fmt.Errorf("invalid settings: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("describe panicked: %v", r)
		}
	}()
	m, err = p.Describe(s)
	if err != nil {
		return Manifest{}, err
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// CallHandle runs Handle the way the host does: settings JSON in ("" for no file); invalid
// settings are a permanent error, a panic a retryable one (with the panicking line). The
// error, if any, is a *HandleError. Use it in tests.
func CallHandle[S any](p Plugin[S], ev Event, settings string) (intents []Intent, err error) {
	s, err := DecodeSettings[S](settings)
	if err != nil {
		return nil, Permanentf("invalid settings: %v", err)
	}
	defer func() {
		if r := recover(); r != nil {
			intents, err = nil, Retryablef("plugin panicked: %v%s", r, panicSite())
		}
	}()
	intents, err = p.Handle(ev, s)
	if err != nil {
		return nil, AsHandleError(err)
	}
	for i, in := range intents {
		if in == nil {
			return nil, Permanentf("intent #%d is nil", i)
		}
	}
	return intents, nil
}

// panicSite is " at file:line" of the code that panicked, from the stack of a deferred
// recover: the first frame under panic(...) outside the runtime ("" when there is none).
func panicSite() string {
	lines := strings.Split(string(debug.Stack()), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic(") {
			continue
		}
		// Frames are pairs: "function(args)" then "\tfile:line +0x..".
		for j := i + 2; j+1 < len(lines); j += 2 {
			fn := lines[j]
			if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/") {
				continue
			}
			loc := strings.TrimSpace(lines[j+1])
			if k := strings.LastIndex(loc, " +0x"); k > 0 {
				loc = loc[:k]
			}
			if k := strings.LastIndexByte(loc, '/'); k >= 0 {
				loc = loc[k+1:]
			}
			return " at " + loc
		}
	}
	return ""
}
