package kubewasm

import "fmt"

// Level is the severity of a log line.
type Level uint8

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// String is the level's name: trace, debug, info, warn, error.
func (l Level) String() string {
	switch l {
	case LevelTrace:
		return "trace"
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// Logger writes to the host's log; every line is tagged with the plugin and the object
// being handled. Use the package's Log: kubewasm.Log.Infof("provisioning %s", name).
//
// Outside the component (go test) lines are kept for kwtest.TakeLogs.
type Logger struct{}

// Log is the plugin's logger.
var Log Logger

// Logf writes one line at level.
func (Logger) Logf(level Level, format string, args ...any) {
	writeLog(level, fmt.Sprintf(format, args...))
}

// Tracef writes a trace line.
func (l Logger) Tracef(format string, args ...any) { l.Logf(LevelTrace, format, args...) }

// Debugf writes a debug line.
func (l Logger) Debugf(format string, args ...any) { l.Logf(LevelDebug, format, args...) }

// Infof writes an info line.
func (l Logger) Infof(format string, args ...any) { l.Logf(LevelInfo, format, args...) }

// Warnf writes a warning.
func (l Logger) Warnf(format string, args ...any) { l.Logf(LevelWarn, format, args...) }

// Errorf writes an error line (it does not fail the call: return an error for that).
func (l Logger) Errorf(format string, args ...any) { l.Logf(LevelError, format, args...) }
