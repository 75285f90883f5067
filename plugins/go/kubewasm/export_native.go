//go:build !wasip1

package kubewasm

// Export makes p the component's plugin: call it from an init function of your main
// package. Outside the component (go test) it does nothing, so the package still builds
// and tests natively.
func Export[S any](p Plugin[S]) { _ = p }
