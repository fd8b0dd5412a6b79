package ingress

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// TestProxy_MalformedClientBodyIsTheClientsFault: a chunked body whose
// chunk size does not parse is answered 400 and charged to nobody. Before,
// it was a 502 counted as a failure of the (healthy) endpoint, so any
// client could make every endpoint of a route look failing, averse and
// ejectable.
func TestProxy_MalformedClientBodyIsTheClientsFault(t *testing.T) {
	var eps []string
	for range 3 {
		eps = append(eps, testbackend.Start(t).Addr)
	}
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "w", Path: "/", Endpoints: eps})
	addr := strings.TrimPrefix(url, "http://")
	for _, chunk := range []string{"zz\r\n", "0x1\r\n"} {
		for range 10 {
			resp, body := rawRequest(t, addr, "POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+chunk)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("chunk %q: status %d (%q), want 400", chunk, resp.StatusCode, body)
			}
		}
	}
	waitFor(t, "the attempts to finish", func() bool {
		for _, ep := range policyStats(t, ing, "w").Endpoints {
			if ep.InFlight != 0 {
				return false
			}
		}
		return true
	})
	st := ing.State().Routes[0]
	if st.UpstreamErrors != 0 {
		t.Errorf("%d upstream errors counted for malformed client bodies", st.UpstreamErrors)
	}
	for _, ep := range st.Policy.Endpoints {
		if ep.Errors != 0 || ep.Averse {
			t.Errorf("endpoint %s charged: errors %d, averse %v", ep.Address, ep.Errors, ep.Averse)
		}
	}
	var ejections uint64
	for _, n := range st.Outliers.Ejections {
		ejections += n
	}
	if ejections != 0 || len(st.Outliers.Ejected) != 0 {
		t.Errorf("endpoints ejected for malformed client bodies: %+v", st.Outliers)
	}
	// A well-formed request still goes through.
	if resp, body := rawRequest(t, addr, "POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Fatalf("well-formed chunked POST: %d %q", resp.StatusCode, body)
	}
}
