package kubewasm

// The Go garbage collector and reused instances.
//
// The host may reuse one instance for many calls. Before each call it writes the arguments
// (the event's JSON) into the instance's memory through the exported cabi_realloc, which
// allocates on the Go heap. If an allocation there starts a GC cycle, the cycle reads the
// wall clock, a WASI import, and the component model forbids calling imports from inside
// cabi_realloc: the instance traps ("cannot leave component instance", wasmtime issue
// #14318) and the host must drop it.
//
// So the layer turns the collector's automatic cycles off when the component starts
// (debug.SetGCPercent(-1): allocation never starts a cycle) and collects explicitly at the
// start of describe and handle, where imports are allowed, once the heap holds more than
// the threshold. Memory then grows to about threshold + what one call allocates, and stays
// there. Natively (go test) nothing changes: the collector runs as usual.

// DefaultGCThreshold is the heap size (bytes of objects, live or garbage) above which a call
// starts with a collection: 4 MiB. Measured on one reused instance (50 ConfigMaps of 2 KB
// from host.List per call, ~650 KB allocated per call): 1-4 MiB cost the same time per call
// as 16-32 MiB, or less, and keep the instance's memory at ~9 MiB instead of 22-40 MiB.
const DefaultGCThreshold = 4 << 20

var gcThreshold uint64 = DefaultGCThreshold

// SetGCThreshold changes the heap size above which a call starts with a collection (0: every
// call). Call it from an init function. A plugin that allocates much more per call (large
// host.List results) may want more; each collection costs time proportional to the live
// heap, usually well under a millisecond.
func SetGCThreshold(bytes uint64) { gcThreshold = bytes }
