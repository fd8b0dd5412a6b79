package scenario

import (
	"fmt"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Warnings returns what in a valid scenario makes a comparison misleading
// without making it wrong: one sentence each, for the campaign to print
// and to record in campaign.json, where the report lists them. It expects
// defaults applied and reads the scenario as it will run (after
// --duration-scale and the other overrides).
//
// wrr: a reset drops its weights and their blackout starts over with the
// first load report after it, so for Blackout + Period (11 s at gRPC's
// defaults) after every reset wrr is round-robin. A warmup shorter than
// that puts round-robin into the measured window. The catalogue's
// scenarios warm up long enough at full length; a --duration-scale short
// run usually does not, and then warns.
func (s *Scenario) Warnings() []string {
	var out []string
	warmup := time.Duration(0)
	if s.Protocol.Warmup != nil {
		warmup = s.Protocol.Warmup.Std()
	}
	window := s.Load.MeasuredDuration()
	for _, alg := range s.Protocol.Algorithms {
		base, _, err := loadbalancer.SplitVariant(alg)
		if err != nil || base != loadbalancer.NameWRR {
			continue
		}
		cfg, err := loadbalancer.ConfigFor(alg, loadbalancer.DefaultConfig())
		if err != nil {
			continue
		}
		ready := cfg.WRR.Blackout + cfg.WRR.Period
		if warmup >= ready {
			continue
		}
		rr := ready - warmup
		part := fmt.Sprintf("the first %s of each measured window", loadbalancer.FormatDuration(rr))
		if window > 0 && rr >= window {
			part = "the whole measured window"
		}
		out = append(out, fmt.Sprintf("%s: its weights come into force up to %s after each reset (blackout %s, then the next weight update, every %s) but protocol.warmup is %s: "+
			"%s runs as round-robin; warm up for at least %s or shorten the blackout (wrr{blackout=1s})",
			alg, loadbalancer.FormatDuration(ready), loadbalancer.FormatDuration(cfg.WRR.Blackout), loadbalancer.FormatDuration(cfg.WRR.Period),
			loadbalancer.FormatDuration(warmup), part, loadbalancer.FormatDuration(ready)))
	}
	return out
}
