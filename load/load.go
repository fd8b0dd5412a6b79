// Package load is the embedded load generator: it offers HTTP load to a
// set of weighted targets, open loop (a schedule of phases) or closed loop
// (N users), and measures latency into exact HDR histograms.
//
// Open-loop latency is timed from the intended send time, as wrk2 does, so
// a stalled server cannot hide its stall by slowing the sender down
// (coordinated omission). Sends that leave more than LateAfter behind
// schedule are counted as late.
//
// The intended send times come from package openloop, a pure schedule the
// simulator shares, so both send at the same instants. vegeta's Attacker
// is not used: it timestamps a hit when a worker picks it up rather than
// when it was due, and reads every body into memory, so this package runs
// its own dispatcher (a pool of workers growing up to MaxWorkers, over a tuned
// http.Transport); and vegeta's Metrics estimate percentiles (a t-digest,
// once 6× off at p99 here), so percentiles come only from
// hdrhistogram-go, 1 µs to 60 s at 3 significant figures.
//
// What is counted: a run is a warmup and a measured window in one schedule
// without a pause (Config.Warmup), and only requests whose intended send
// time lies in the window count. Each ends as a success (2xx/3xx), a 4xx,
// a 5xx, a timeout or a connection error; goodput is successes per second
// of the window. Four histograms: the latency of successes (the headline),
// a pessimistic one over every request with failures at the timeout, the
// send lag (how far behind schedule each send left: the generator's own
// fidelity) and the connection wait (send to httptrace GotConn), with the
// waits at a full connection cap counted apart (Result.ConnCapBound).
//
// Memory is flat however long the run: totals, a few histograms and one
// row per elapsed second; never a record per request.
package load
