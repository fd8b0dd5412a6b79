package reports_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// setEnvironment rewrites the campaign's environment facts.
func setEnvironment(t *testing.T, dir string, f func(*artifacts.Environment)) {
	t.Helper()
	p := filepath.Join(dir, artifacts.CampaignFile)
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(p, &c); err != nil {
		t.Fatal(err)
	}
	f(&c.Environment)
	if err := artifacts.WriteJSON(p, c); err != nil {
		t.Fatal(err)
	}
}

// The Setup table says which path the load took and where it went, and
// a fallback from the generators (RBAC) is a report warning; artifacts
// without the fact keep their report (no row).
func TestReport_SaysWhichLoadPath(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(3))
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(files[artifacts.ReportFile]), "| Load ") {
		t.Error("a Load row without the fact")
	}
	setEnvironment(t, dir, func(e *artifacts.Environment) {
		e.Name = "kube"
		e.Load = &artifacts.LoadPath{Path: artifacts.LoadFromCLI, URLs: []string{"http://203.0.113.1:31080"},
			Via:      "NodePort 31080 of Service prequalbench-system/prequal-ingress on the nodes running an ingress pod",
			Warnings: []string{"in-cluster generators (2) not allowed in namespace bench (RBAC denies create jobs); the load came from the machine running the campaign instead"}}
	})
	files, err = reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	for _, want := range []string{
		"| Load         | from the machine running the campaign to http://203.0.113.1:31080 (NodePort 31080 of Service",
		"- load path: in-cluster generators (2) not allowed in namespace bench (RBAC denies create jobs)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	setEnvironment(t, dir, func(e *artifacts.Environment) {
		e.Load = &artifacts.LoadPath{Path: artifacts.LoadFromGenerators, Generators: 4,
			URLs: []string{"http://prequal-ingress.prequalbench-system.svc:8080"}, Via: "the ingress Service from Jobs in namespace bench"}
	})
	files, err = reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if md := string(files[artifacts.ReportFile]); !strings.Contains(md, "from 4 in-cluster generator Job(s) to http://prequal-ingress.prequalbench-system.svc:8080") {
		t.Error("the report does not name the generators")
	}
}
