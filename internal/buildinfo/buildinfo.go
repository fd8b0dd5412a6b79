// Package buildinfo reports the version of the running binary: the module
// version, the git revision it was built from and the Go version.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Dirty     bool   `json:"dirty"`
	GoVersion string `json:"go_version"`
}

// Revision may be set at link time (-X) when the build has no VCS stamp,
// as in "go run" or a Docker build without .git.
var Revision string

// Read returns the build information of the running binary.
func Read() Info {
	info := Info{Version: "(devel)", Revision: Revision, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Revision == "" {
				info.Revision = s.Value
			}
		case "vcs.modified":
			info.Dirty = s.Value == "true"
		}
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}
