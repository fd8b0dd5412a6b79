package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIngressCommand_BadHardeningFlagsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--routes", "x", "--trusted-proxies", "10.0.0.0/8,not-an-ip"}, `--trusted-proxies: "not-an-ip"`},
		{[]string{"--routes", "x", "--shutdown-delay", "-1s"}, "--shutdown-delay"},
		{[]string{"--routes", "x", "--upstream-read-timeout", "0s"}, "--upstream-read-timeout"},
		{[]string{"--routes", "x", "--client-body-timeout", "-1s"}, "--client-body-timeout"},
		{[]string{"--routes", "x", "--max-body-size", "lots"}, `--max-body-size "lots": want a byte count`},
		{[]string{"--routes", "x", "--max-body-size", "0"}, `--max-body-size "0"`},
		{[]string{"--routes", "x", "--max-body-size", "2Gi"}, `--max-body-size "2Gi"`},
	} {
		err := runIngressCmd(context.Background(), tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v (exit %d), want exit 2 naming %s", tc.args, err, exitCode(err), tc.want)
		}
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := parseTrustedProxies([]string{"10.1.2.3/8", " 192.0.2.7 ", "", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("fd00::/8")}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int{"32Mi": 32 << 20, "1M": 1000000, "1048576": 1 << 20, "1Gi": 1 << 30} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
