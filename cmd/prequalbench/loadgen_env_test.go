package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestGeneratorsFlagRange(t *testing.T) {
	for _, name := range []string{"kind", "kube"} {
		f := campaignRunFlags{generators: -1, serviceType: "NodePort"}
		if _, err := campaignEnvs[name](context.Background(), &f, io.Discard); err == nil || !strings.Contains(err.Error(), "--generators") {
			t.Errorf("%s: --generators -1: %v", name, err)
		}
	}
}
