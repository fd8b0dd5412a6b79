package kubesource

import (
	"fmt"
	"strings"
)

// canonicalAlgorithm turns an annotation value into the policy name the
// dataplane expects. The seed's spellings are accepted.
func canonicalAlgorithm(v string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(v))
	switch n {
	case "prequal", "hcl":
		return "prequal", nil
	case "round-robin", "roundrobin", "round_robin", "rr":
		return "round-robin", nil
	case "least-connections", "leastconnections", "least_connections", "least-conn", "lc":
		return "least-connections", nil
	case "random":
		return "random", nil
	case "power-of-two", "p2c", "power-of-two-choices":
		return "p2c", nil
	}
	return "", fmt.Errorf("kubesource: unknown algorithm %q (want prequal, round-robin, least-connections, random or p2c)", v)
}
