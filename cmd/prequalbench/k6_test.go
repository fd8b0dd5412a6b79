package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/campaign/artifacts"
)

func TestK6ExportAndImport(t *testing.T) {
	code, js := runCLI(t, "k6", "export", "quickstart", "--base-url", "http://127.0.0.1:9")
	if code != 0 {
		t.Fatal(js)
	}
	if !strings.Contains(js, "import http from 'k6/http'") || !strings.Contains(js, `"executor": "constant-arrival-rate"`) {
		t.Errorf("export:\n%s", js)
	}
	dir := t.TempDir()
	code, out := runCLI(t, "k6", "import", filepath.Join("..", "..", "campaign", "k6", "testdata", "summary.json"),
		"--algorithm", "round-robin", "--out", dir)
	if code != 0 {
		t.Fatal(out)
	}
	if !strings.Contains(out, "2000 sent, 12 failed") || !strings.Contains(out, "k6 estimates") {
		t.Errorf("import said:\n%s", out)
	}
	var r artifacts.Run
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunsDir, "k6-round-robin", artifacts.RunFile), &r); err != nil {
		t.Fatal(err)
	}
	if r.Validity.Valid || r.Load.Sent != 2000 || r.Algorithm != "round-robin" || r.Index != 0 {
		t.Errorf("run.json: %+v", r)
	}
	// A second import of the same label does not overwrite the first.
	if code, out := runCLI(t, "k6", "import", filepath.Join("..", "..", "campaign", "k6", "testdata", "summary.json"),
		"--algorithm", "round-robin", "--out", dir); code != 2 || !strings.Contains(out, "exists") {
		t.Errorf("second import: exit %d\n%s", code, out)
	}
}
