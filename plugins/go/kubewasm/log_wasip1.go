//go:build wasip1

package kubewasm

import witHost "kubewasm.dev/bindings/imports/kubewasm_plugin_host"

func writeLog(level Level, message string) { witHost.Log(uint8(level), message) }
