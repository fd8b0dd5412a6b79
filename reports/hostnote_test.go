package reports_test

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// A cluster run whose node CPU could not be read says so under Validity,
// with the reason its run recorded, and never claims the host check
// passed; a reset that checked only the backends is reported as such.
func TestRender_SaysWhatTheHostCheckAndResetChecked(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(2)
	spec.Requests = 600
	spec.HostUnchecked = true
	spec.HostCheckNote = "node CPU not readable: the kubelet summary API (/api/v1/nodes/NODE/proxy/stats/summary) failed on node kind-control-plane: no preferred addresses found"
	spec.ResetDetail = "external: the reset hook exited 0 (the ingress's own state is not visible here: its pools and counters were not checked); 3 prequalbench backends reset and clean (zero counters, nothing in flight)"
	md := render(t, fixture(t, spec))
	validity := md[strings.Index(md, "## Validity"):]
	validity = validity[:strings.Index(validity[3:], "\n## ")+3]
	if !strings.Contains(validity, "Host check of run(s) 1, 2, 3, 4: node CPU not readable: the kubelet summary API") ||
		!strings.Contains(validity, "Host headroom: not checked") || strings.Contains(validity, "Host headroom: passed") {
		t.Errorf("the Validity section does not say why the host went unchecked:\n%s", validity)
	}
	if !strings.Contains(md, "Every reset was verified (4 of 4); what was checked, as recorded: external: the reset hook exited 0 (the ingress's own state is not visible here") ||
		strings.Contains(md, "empty pools, zero counters, nothing in flight") {
		t.Errorf("the reset sentence claims more than the runs recorded:\n%s", md[:min(len(md), 2500)])
	}
}
