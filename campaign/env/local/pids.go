package local

import (
	"slices"

	"github.com/prequalbench/prequalbench/campaign/env"
)

var _ env.ProcessLister = (*Env)(nil)

// PIDs lists the ingress replicas' and the backends' processes, for the
// runner's CPU sampling. A restart reset starts new processes, so the
// runner asks after each Reset. A cpu-share machine's replicas share one
// process, listed once.
func (e *Env) PIDs() env.PIDs {
	var p env.PIDs
	for _, in := range e.ingresses {
		if in != nil && in.proc != nil {
			p.Ingress = append(p.Ingress, in.proc.pid())
		}
	}
	for _, b := range e.backendList() {
		if b.proc != nil && !slices.Contains(p.Backends, b.proc.pid()) {
			p.Backends = append(p.Backends, b.proc.pid())
		}
	}
	return p
}
