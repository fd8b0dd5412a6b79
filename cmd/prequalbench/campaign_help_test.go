package main

import (
	"strings"
	"testing"
)

// pflag takes a back-quoted word in a usage text as the flag's type name,
// so `campaign run --help` once showed "-n, --namespace cluster up".
func TestCampaignRunHelp_FlagTypesShow(t *testing.T) {
	usage := newCampaignRunCommand().Flags().FlagUsages()
	for _, want := range []string{"-n, --namespace string", "--context string", "--kubeconfig string", "--cluster string"} {
		if !strings.Contains(usage, want) {
			t.Errorf("campaign run --help lacks %q:\n%s", want, usage)
		}
	}
}
