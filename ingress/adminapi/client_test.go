package adminapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

func TestVerifyReset(t *testing.T) {
	clean := State{Routes: []RouteState{{Key: "a", Policy: loadbalancer.Stats{
		Endpoints:     []loadbalancer.EndpointStats{{Address: "127.0.0.1:1"}},
		ProbeOutcomes: map[loadbalancer.ProbeOutcome]uint64{loadbalancer.ProbeOK: 0},
	}}}}
	if err := clean.VerifyReset(); err != nil {
		t.Fatalf("clean state: %v", err)
	}
	dirty := clean
	dirty.Routes = []RouteState{clean.Routes[0]}
	dirty.Routes[0].Policy.PoolSize = 2
	dirty.Routes[0].Policy.Endpoints = []loadbalancer.EndpointStats{{Address: "127.0.0.1:1", InFlight: 1}}
	dirty.Routes[0].Policy.ProbeOutcomes = map[loadbalancer.ProbeOutcome]uint64{loadbalancer.ProbeStale: 3}
	dirty.Routes[0].Policy.Aversions = 4
	dirty.Routes[0].Outliers = OutlierState{Ejected: []EjectedEndpoint{{Address: "127.0.0.1:1"}}, Ejections: map[string]uint64{"consecutive": 1}}
	err := dirty.VerifyReset()
	for _, want := range []string{`route "a"`, "policy.pool_size = 2", "endpoint 127.0.0.1:1 in_flight = 1", "policy.probe_outcomes[stale] = 3",
		"policy.error_aversions = 4", "outliers.ejected = 1", "outliers.ejections[consecutive] = 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("VerifyReset = %v, want it to mention %s", err, want)
		}
	}
}

func TestClient_ErrorCarriesServerMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"admin: missing or wrong bearer token"}`))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"admin: algorithm: unknown"}`))
	}))
	defer srv.Close()
	var he *HTTPError
	err := NewClient(srv.URL, "").SetAlgorithm(context.Background(), "", "x")
	if !errors.As(err, &he) || he.StatusCode != 401 || he.Message != "admin: missing or wrong bearer token" {
		t.Fatalf("err = %v", err)
	}
	err = NewClient(srv.URL+"/", "tok").SetAlgorithm(context.Background(), "", "x")
	if !errors.As(err, &he) || he.StatusCode != 400 || !strings.Contains(err.Error(), "POST /admin/algorithm: 400 Bad Request: admin: algorithm: unknown") {
		t.Fatalf("err = %v", err)
	}
}
