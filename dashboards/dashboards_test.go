package dashboards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/dashboards"
	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/ingresstest"
	"github.com/prequalbench/prequalbench/ingress/route"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type board struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record string `json:"record"`
			Alert  string `json:"alert"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// exprs returns every PromQL expression of the dashboards and rules, with
// where it came from, and the names the rules record.
func exprs(t *testing.T) (map[string]string, map[string]bool) {
	t.Helper()
	out := map[string]string{}
	boards, err := dashboards.Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range boards {
		var b board
		if err := json.Unmarshal(d.Data, &b); err != nil {
			t.Fatal(err)
		}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				for i, tg := range p.Targets {
					out[fmt.Sprintf("%s panel %q target %d", d.Name, p.Title, i)] = tg.Expr
				}
				walk(p.Panels)
			}
		}
		walk(b.Panels)
		for _, v := range b.Templating.List {
			if q, ok := v.Query.(map[string]any); ok {
				out[fmt.Sprintf("%s variable %s", d.Name, v.Name)] = fmt.Sprint(q["query"])
			}
		}
	}
	recorded := map[string]bool{}
	rules, err := dashboards.Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rules {
		var rf ruleFile
		if err := yaml.Unmarshal(f.Data, &rf); err != nil {
			t.Fatal(err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				out[fmt.Sprintf("%s rule %s%s", f.Name, r.Record, r.Alert)] = r.Expr
				if r.Record != "" {
					recorded[r.Record] = true
				}
			}
		}
	}
	return out, recorded
}

func TestDashboardsAreValid(t *testing.T) {
	boards, err := dashboards.Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	if len(boards) < 5 {
		t.Fatalf("%d dashboards, want at least 5", len(boards))
	}
	uids := map[string]string{}
	for _, d := range boards {
		if prev, dup := uids[d.UID]; dup {
			t.Errorf("uid %q used by %s and %s", d.UID, prev, d.Name)
		}
		uids[d.UID] = d.Name
		var b board
		if err := json.Unmarshal(d.Data, &b); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		hasVar := false
		for _, v := range b.Templating.List {
			if v.Type == "datasource" && v.Name == "datasource" && v.Query == "prometheus" {
				hasVar = true
			}
		}
		if !hasVar {
			t.Errorf("%s: no Prometheus datasource variable named datasource", d.Name)
		}
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] || p.ID == 0 {
					t.Errorf("%s: panel %q has a missing or repeated id %d", d.Name, p.Title, p.ID)
				}
				ids[p.ID] = true
				if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
					t.Errorf("%s: panel %q does not use the ${datasource} variable", d.Name, p.Title)
				}
				if p.Type != "row" && len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", d.Name, p.Title)
				}
				walk(p.Panels)
			}
		}
		walk(b.Panels)
	}
}

func TestRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; hack/setup.sh installs Debian's prometheus package, and CI must have it")
		}
		t.Skip("skipping: promtool not found (install Debian's prometheus package, or run hack/setup.sh)")
	}
	rules, err := dashboards.Rules()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, r := range rules {
		p := filepath.Join(dir, r.Name)
		if err := os.WriteFile(p, r.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(promtool, "check", "rules", p).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", r.Name, err, out)
		}
	}
}

var (
	identRe   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	stringsRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// metricNames picks the series names out of an expression: identifiers
// of our namespaces (prequal_, go_, process_) and recorded names (with a
// colon), after removing string literals.
func metricNames(expr string) []string {
	expr = stringsRe.ReplaceAllString(expr, `""`)
	var out []string
	for _, id := range identRe.FindAllString(expr, -1) {
		if strings.Contains(id, ":") || strings.HasPrefix(id, "prequal_") || strings.HasPrefix(id, "go_") || strings.HasPrefix(id, "process_") {
			out = append(out, id)
		}
	}
	return out
}

// scrapeIngress runs the real ingress in process against a fake backend
// on loopback, sends requests (routed and unrouted), lets the prober
// work, and returns its parsed /metrics.
func scrapeIngress(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/prequal/probe":
			fmt.Fprintf(w, `{"rif":0,"latency_median_ms":1.5,"timestamp_ms":%d,"samples":3}`, time.Now().UnixMilli())
		default:
			fmt.Fprint(w, `{"duration_ms":0.1,"queue_ms":0,"rif_at_arrival":0}`)
		}
	}))
	defer backend.Close()
	ing, err := ingress.New(ingress.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runDone := make(chan struct{})
	go func() { _ = ing.Run(ctx); close(runDone) }()
	defer func() { cancel(); <-runDone }()
	addr := strings.TrimPrefix(backend.URL, "http://")
	ing.Update([]route.Spec{{Key: "r1", Path: "/work", PathType: route.PathPrefix, Algorithm: "prequal", Endpoints: []string{addr}}})
	ing.ObserveReconcile("success", time.Millisecond)
	admin := ing.Admin(ingress.AdminConfig{})
	proxyURL := ingresstest.Serve(t, ing)

	get := func(path string) {
		resp, err := http.Get(proxyURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/nowhere")
	for {
		for range 5 {
			get("/work?iterations=10")
		}
		fams := parse(t, admin)
		if fams["prequal_probe_results_total"] != nil && fams["prequal_selections_total"] != nil && fams["prequal_probe_duration_seconds"] != nil {
			return fams
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the ingress never reported probe results; families: %v", keys(fams))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func parse(t *testing.T, admin http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Host = "127.0.0.1:8081" // as Prometheus scrapes: by address (a DNS name is refused)
	admin.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestEveryMetricExists catches drift between the dashboards and rules
// and the names the ingress really exports.
func TestEveryMetricExists(t *testing.T) {
	fams := scrapeIngress(t)
	exported := map[string]bool{}
	for name, f := range fams {
		exported[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			exported[name+"_bucket"] = true
			exported[name+"_sum"] = true
			exported[name+"_count"] = true
		}
	}
	all, recorded := exprs(t)
	used := 0
	for where, expr := range all {
		for _, name := range metricNames(expr) {
			used++
			if strings.Contains(name, ":") {
				if !recorded[name] {
					t.Errorf("%s uses %s, which no rule records", where, name)
				}
				continue
			}
			if !exported[name] {
				t.Errorf("%s uses %s, which the ingress does not export", where, name)
			}
		}
	}
	if used < 30 {
		t.Errorf("only %d metric uses found; the extraction is broken", used)
	}
	for _, want := range []string{"prequal_requests_total", "prequal_probes_sent_total", "prequal_pool_occupancy", "prequal_reconciles_total"} {
		found := false
		for _, expr := range all {
			found = found || strings.Contains(expr, want)
		}
		if !found {
			t.Errorf("no panel or rule uses %s", want)
		}
	}
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (route) (rate(prequal_requests_total{code!~"2..",route="go_x"}[1m])) / route:prequal_requests:rate1m`)
	want := []string{"prequal_requests_total", "route:prequal_requests:rate1m"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("metricNames = %v, want %v", got, want)
	}
}
