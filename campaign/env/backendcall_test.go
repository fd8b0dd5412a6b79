package env

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Call returns a 200's body, bounded; another status is an error that
// carries the answer. CallBackend decodes the counters and Clean holds
// only for all-zero counters (max_queue included).
func TestCallAndCallBackend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stats":
			_, _ = w.Write([]byte(`{"in_flight":0,"queued":0,"served":0,"rejected":0,"max_queue":2}`))
		case "/reset":
			if r.Method != http.MethodPost {
				http.Error(w, "want POST", http.StatusMethodNotAllowed)
				return
			}
			_, _ = w.Write([]byte(`{}`))
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", MaxAnswer+100)))
		case "/bad":
			_, _ = w.Write([]byte(`not json`))
		default:
			http.Error(w, "no such thing", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	ctx, c := context.Background(), srv.Client()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if b, err := Call(ctx, c, http.MethodGet, srv.URL+"/big"); err != nil || len(b) != MaxAnswer {
		t.Errorf("big answer: %d bytes, %v", len(b), err)
	}
	if _, err := Call(ctx, c, http.MethodGet, srv.URL+"/nope"); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("404: %v", err)
	}
	st, err := CallBackend(ctx, c, http.MethodGet, addr, "/stats")
	if err != nil || st.MaxQueue != 2 || st.Clean() {
		t.Errorf("stats %+v clean %v, %v", st, st.Clean(), err)
	}
	if st, err := CallBackend(ctx, c, http.MethodPost, addr, "/reset"); err != nil || !st.Clean() {
		t.Errorf("reset %+v, %v", st, err)
	}
	if _, err := CallBackend(ctx, c, http.MethodGet, addr, "/reset"); err == nil {
		t.Error("a 405 decoded")
	}
	if _, err := CallBackend(ctx, c, http.MethodGet, addr, "/bad"); err == nil || !strings.Contains(err.Error(), "bad answer") {
		t.Errorf("bad answer: %v", err)
	}
}
