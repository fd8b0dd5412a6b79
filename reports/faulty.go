package reports

import (
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/prequalbench/prequalbench/artifacts"
)

// faultyGroup is a backend group the scenario gives a probe or work fault.
type faultyGroup struct {
	Name  string
	Fault string // e.g. "probe timeout", "work fail_fast"
}

// faultyGroups reads the groups with a fault from the campaign's resolved
// scenario, in scenario order. Only the fields needed are decoded, so the
// report does not depend on the scenario package's strictness.
func faultyGroups(c *artifacts.Campaign) []faultyGroup {
	var sc struct {
		Workload struct {
			Routes []struct {
				Backends []struct {
					Name       string `json:"name"`
					ProbeFault string `json:"probeFault"`
					WorkFault  string `json:"workFault"`
				} `json:"backends"`
			} `json:"routes"`
		} `json:"workload"`
	}
	if err := yaml.Unmarshal([]byte(c.ScenarioYAML), &sc); err != nil {
		return nil
	}
	var out []faultyGroup
	for _, r := range sc.Workload.Routes {
		for _, b := range r.Backends {
			var faults []string
			if b.ProbeFault != "" && b.ProbeFault != "none" {
				faults = append(faults, "probe "+b.ProbeFault)
			}
			if b.WorkFault != "" && b.WorkFault != "none" {
				faults = append(faults, "work "+b.WorkFault)
			}
			if len(faults) > 0 {
				out = append(out, faultyGroup{Name: b.Name, Fault: strings.Join(faults, ", ")})
			}
		}
	}
	return out
}

// faultyTotals are one algorithm's window counters over its counted runs.
type faultyTotals struct {
	runs                        int
	sent, clientErrors          uint64
	picks, endpointErrors       map[string]uint64 // by backend address
	allPicks                    uint64
	aversions, ejected, returns uint64
}

// faultyTotalsOf sums the window deltas (after − before snapshot) of an
// algorithm's runs that enter the headline.
func faultyTotalsOf(ds *dataset, a *Analysis, alg string) faultyTotals {
	valid := map[int]bool{}
	for _, r := range a.Runs {
		valid[r.Index] = r.Valid && r.Status == artifacts.StatusOK
	}
	t := faultyTotals{picks: map[string]uint64{}, endpointErrors: map[string]uint64{}}
	for _, r := range ds.Runs {
		if r.Run.Algorithm != alg || !counted(ds, r) || !valid[r.Run.Index] || r.After == nil {
			continue
		}
		t.runs++
		t.sent += r.Run.Load.Sent
		t.clientErrors += r.Run.Load.Errors
		for i, st := range r.After {
			prev := map[string]map[string]uint64{} // route → address → picks, errors (keyed "p:", "e:")
			var prevAv, prevEj, prevRet uint64
			if i < len(r.Before) {
				for _, rt := range r.Before[i].Routes {
					m := map[string]uint64{}
					for _, e := range rt.Policy.Endpoints {
						m["p:"+e.Address] += e.Picks
						m["e:"+e.Address] += e.Errors
					}
					prev[rt.Key] = m
					prevAv += rt.Policy.Aversions
					prevRet += rt.Outliers.Returns
					for _, n := range rt.Outliers.Ejections {
						prevEj += n
					}
				}
			}
			var av, ej, ret uint64
			var reset bool
			for _, rt := range st.Routes {
				pm := prev[rt.Key]
				for _, e := range rt.Policy.Endpoints {
					p := sub(e.Picks, pm["p:"+e.Address], &reset)
					t.picks[e.Address] += p
					t.allPicks += p
					t.endpointErrors[e.Address] += sub(e.Errors, pm["e:"+e.Address], &reset)
				}
				av += rt.Policy.Aversions
				ret += rt.Outliers.Returns
				for _, n := range rt.Outliers.Ejections {
					ej += n
				}
			}
			t.aversions += sub(av, prevAv, &reset)
			t.ejected += sub(ej, prevEj, &reset)
			t.returns += sub(ret, prevRet, &reset)
		}
	}
	return t
}

// writeFaulty writes the "Faulty replicas" section when the scenario has
// replicas with a fault: each one's share of the picks against its fair
// share, the failures the policy counted there, and what clients saw.
func writeFaulty(w io.Writer, ds *dataset, a *Analysis) {
	groups := faultyGroups(&ds.Campaign)
	if len(groups) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	n := len(ds.Campaign.Backends)
	p("## Faulty replicas\n\n")
	p("Replicas the scenario gives a fault. Per algorithm, over its valid runs' measured windows (summed over runs and ingress replicas): "+
		"each faulty replica's share of the picks (fair share 1/%d = %s) with, in brackets, the requests it failed "+
		"(status 0 or 5xx, as its policy counted them, retries' first attempts included); the error rate clients saw; "+
		"picks that passed over an averse endpoint (error aversion); and the ingress's outlier ejections and returns.\n\n",
		n, fmtPct(1/float64(max(n, 1))))
	header := []string{"algorithm", "runs"}
	var addrs []string
	for _, g := range groups {
		for _, b := range ds.Campaign.Backends {
			if b.Group == g.Name {
				addrs = append(addrs, b.Address)
				header = append(header, fmt.Sprintf("%s (%s)", b.Group, g.Fault))
			}
		}
	}
	header = append(header, "client errors", "aversions", "ejections", "returns")
	var rows [][]string
	for _, alg := range algorithms(ds) {
		t := faultyTotalsOf(ds, a, alg)
		row := []string{alg, fmt.Sprint(t.runs)}
		for _, ad := range addrs {
			if t.allPicks == 0 {
				row = append(row, "—")
				continue
			}
			row = append(row, fmt.Sprintf("%s (%d)", fmtPct(float64(t.picks[ad])/float64(t.allPicks)), t.endpointErrors[ad]))
		}
		errRate := "—"
		if t.sent > 0 {
			errRate = fmtPct(float64(t.clientErrors) / float64(t.sent))
		}
		row = append(row, errRate, fmt.Sprint(t.aversions), fmt.Sprint(t.ejected), fmt.Sprint(t.returns))
		rows = append(rows, row)
	}
	right := []int{}
	for i := 1; i < len(header); i++ {
		right = append(right, i)
	}
	mdTable(w, header, rows, right...)
	p("\n")
}
