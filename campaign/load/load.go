// Package load is the embedded load generator: it offers HTTP load to a
// set of weighted targets, open loop (a schedule of phases) or closed loop
// (N users), and measures latency into exact HDR histograms.
//
// Open-loop latency is timed from the intended send time, as wrk2 does, so
// a stalled server cannot hide its stall by slowing the sender down
// (coordinated omission). Sends that leave more than LateAfter behind
// schedule are counted as late.
//
// What comes from vegeta (github.com/tsenart/vegeta/v12/lib): the pacing.
// Each phase is a vegeta.Pacer (vegeta.ConstantPacer for constant phases,
// vegeta.LinearPacer for ramps, and this package's piecewisePacer, which
// implements vegeta.Pacer, for steps and bursts), and the schedule asks it
// for intended send times in virtual time. What does not: vegeta's Attacker
// timestamps a hit when a worker picks it up rather than when it was due,
// and reads every body into memory, so this package runs its own
// dispatcher (a pool of workers growing up to MaxWorkers, over a tuned
// http.Transport); and vegeta's Metrics estimate percentiles (a t-digest,
// once 6× off at p99 here), so percentiles come only from
// hdrhistogram-go, 1 µs to 60 s at 3 significant figures.
//
// Memory is flat however long the run: totals, one per-second histogram
// and one row per elapsed second; never a record per request.
package load
