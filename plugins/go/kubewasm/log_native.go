//go:build !wasip1

package kubewasm

import "kubewasm.dev/kubewasm/internal/fake"

func writeLog(level Level, message string) { fake.Log(uint8(level), message) }
