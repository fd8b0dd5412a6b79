package kind

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/log"
)

// Logger is kind's log.Logger at kind's own CLI verbosity: warnings
// (e.g. "timed out waiting for Ready"), errors and V(0) status lines go
// to w, debug levels (V(1) and up) only up to Verbosity.
type Logger struct {
	W         io.Writer
	Verbosity log.Level
	mu        sync.Mutex
}

var _ log.Logger = (*Logger)(nil)

func (l *Logger) write(prefix, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	fmt.Fprint(l.W, "kind: "+prefix+msg)
}

func (l *Logger) Warn(message string)               { l.write("WARNING: ", message) }
func (l *Logger) Warnf(format string, args ...any)  { l.Warn(fmt.Sprintf(format, args...)) }
func (l *Logger) Error(message string)              { l.write("ERROR: ", message) }
func (l *Logger) Errorf(format string, args ...any) { l.Error(fmt.Sprintf(format, args...)) }
func (l *Logger) V(level log.Level) log.InfoLogger  { return infoLogger{l: l, on: level <= l.Verbosity} }

type infoLogger struct {
	l  *Logger
	on bool
}

func (i infoLogger) Info(message string) {
	if i.on {
		i.l.write("", message)
	}
}
func (i infoLogger) Infof(format string, args ...any) {
	if i.on {
		i.l.write("", fmt.Sprintf(format, args...))
	}
}
func (i infoLogger) Enabled() bool { return i.on }
