// Package dashboards holds the project's Grafana dashboards and Prometheus
// rules as embedded files, so `cluster up --observability` can provision
// them into ConfigMaps and a local Prometheus can load the same rules. The
// files are the source of truth; this package only reads them.
package dashboards

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed *.json
var dashboardFiles embed.FS

//go:embed rules/*.yml
var ruleFiles embed.FS

// File is one embedded file: its base name and content.
type File struct {
	Name string
	Data []byte
}

// Dashboard is one Grafana dashboard file with the fields the tests and the
// provisioning need.
type Dashboard struct {
	File
	UID   string
	Title string
}

// Dashboards returns every dashboard, sorted by file name.
func Dashboards() ([]Dashboard, error) {
	files, err := readAll(dashboardFiles, ".")
	if err != nil {
		return nil, err
	}
	out := make([]Dashboard, 0, len(files))
	for _, f := range files {
		var head struct {
			UID   string `json:"uid"`
			Title string `json:"title"`
		}
		if err := json.Unmarshal(f.Data, &head); err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", f.Name, err)
		}
		if head.UID == "" || head.Title == "" {
			return nil, fmt.Errorf("dashboards: %s: uid and title must be set", f.Name)
		}
		out = append(out, Dashboard{File: f, UID: head.UID, Title: head.Title})
	}
	return out, nil
}

// Rules returns the Prometheus rule files (recording and alerting), sorted
// by file name.
func Rules() ([]File, error) {
	return readAll(ruleFiles, "rules")
}

func readAll(fsys embed.FS, dir string) ([]File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("dashboards: %w", err)
	}
	var out []File
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("dashboards: %w", err)
		}
		out = append(out, File{Name: e.Name(), Data: data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
