package local

import "github.com/prequalbench/prequalbench/campaign/env"

var _ env.ProcessLister = (*Env)(nil)

// PIDs lists the ingress replicas' and the backends' processes, for the
// runner's CPU sampling. A restart reset starts new processes, so the
// runner asks after each Reset.
func (e *Env) PIDs() env.PIDs {
	var p env.PIDs
	for _, in := range e.ingresses {
		if in != nil && in.proc != nil {
			p.Ingress = append(p.Ingress, in.proc.pid())
		}
	}
	for _, b := range e.backendList() {
		if b.proc != nil {
			p.Backends = append(p.Backends, b.proc.pid())
		}
	}
	return p
}
