package campaign

import (
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/schollz/progressbar/v3"
)

// Progress receives the runner's progress events, all from the runner's
// goroutine except Second, which the load engine calls from its own.
type Progress interface {
	// CampaignStart: the plan, how many runs are already done (resume) and
	// the planned length of one run.
	CampaignStart(c *artifacts.Campaign, done int, runLength time.Duration)
	// RunStart: a run begins; warmup and window are its planned lengths.
	RunStart(p artifacts.PlannedRun, warmup, window time.Duration)
	// Phase: reset, warmup, measure or cooldown.
	Phase(name string)
	// Second: one second of load (warmup or window) went by.
	Second()
	// RunEnd: a run finished (ok or failed) and its artifacts are written.
	RunEnd(r artifacts.Run)
	CampaignEnd()
}

type nopProgress struct{}

func (nopProgress) CampaignStart(*artifacts.Campaign, int, time.Duration)       {}
func (nopProgress) RunStart(artifacts.PlannedRun, time.Duration, time.Duration) {}
func (nopProgress) Phase(string)                                                {}
func (nopProgress) Second()                                                     {}
func (nopProgress) RunEnd(artifacts.Run)                                        {}
func (nopProgress) CampaignEnd()                                                {}

// NewProgress returns the progress display: progress bars (one per run,
// and one for the campaign with its ETA) when tty is true, else one plain
// line per run.
func NewProgress(w io.Writer, tty bool) Progress {
	return &display{w: w, tty: tty, now: time.Now}
}

type display struct {
	w   io.Writer
	tty bool

	now func() time.Time // the clock the ETA is measured on

	mu        sync.Mutex
	total     int
	done      int
	runLength time.Duration
	started   time.Time // CampaignStart
	doneHere  int       // runs finished since CampaignStart
	algWidth  int       // the longest algorithm name of the plan, so columns align
	current   artifacts.PlannedRun
	bar       *progressbar.ProgressBar
	campaign  *progressbar.ProgressBar
}

func (d *display) CampaignStart(c *artifacts.Campaign, done int, runLength time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total, d.done, d.runLength = len(c.Plan), done, runLength
	d.started, d.doneHere = d.now(), 0
	d.algWidth = algorithmWidth(c.Plan)
	fmt.Fprintf(d.w, "campaign %s: %d runs (%d done), about %s each\n", c.ID, d.total, done, runLength.Round(time.Second))
	if d.tty {
		d.campaign = progressbar.NewOptions(d.total,
			progressbar.OptionSetWriter(d.w),
			progressbar.OptionSetDescription("campaign"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionSetWidth(30),
		)
		_ = d.campaign.Set(done)
	}
}

func (d *display) RunStart(p artifacts.PlannedRun, warmup, window time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.current = p
	if !d.tty {
		return
	}
	secs := int((warmup + window + time.Second - 1) / time.Second)
	d.bar = progressbar.NewOptions(max(secs, 1),
		progressbar.OptionSetWriter(d.w),
		progressbar.OptionSetDescription(d.describe("reset")),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("s"),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
	_ = d.bar.RenderBlank()
}

func (d *display) describe(phase string) string {
	return fmt.Sprintf("[%02d/%02d] rep%d %-*s %-8s", d.current.Index, d.total, d.current.Rep, d.algWidth, d.current.Algorithm, phase)
}

// algorithmWidth is the width of the algorithm column: the longest name
// in the plan (variants such as "prequal{qrif=0.84}" included).
func algorithmWidth(plan []artifacts.PlannedRun) int {
	w := 0
	for _, p := range plan {
		w = max(w, utf8.RuneCountInString(p.Algorithm))
	}
	return w
}

func (d *display) Phase(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bar != nil {
		d.bar.Describe(d.describe(name))
	}
}

func (d *display) Second() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bar != nil {
		_ = d.bar.Add(1)
	}
}

func (d *display) RunEnd(r artifacts.Run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done++
	d.doneHere++
	if d.bar != nil {
		_ = d.bar.Finish() // clears the run bar
		d.bar = nil
	}
	fmt.Fprintln(d.w, runLine(r, d.total, d.algWidth)+"  "+d.eta())
	if d.campaign != nil {
		d.campaign.Describe("campaign " + d.eta())
		_ = d.campaign.Set(d.done)
		fmt.Fprintln(d.w)
	}
}

// eta is the runs left times the wall time a run has taken so far in
// this session (reset and collection included), or, before the first one
// ends, its planned length. Measured, because a simulated run takes a
// fraction of its virtual length and a real one more than its window.
func (d *display) eta() string {
	per := d.runLength
	if d.doneHere > 0 {
		per = d.now().Sub(d.started) / time.Duration(d.doneHere)
	}
	left := time.Duration(d.total-d.done) * per
	return "ETA " + left.Round(time.Second).String()
}

func (d *display) CampaignEnd() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bar != nil {
		_ = d.bar.Exit()
		d.bar = nil
		fmt.Fprintln(d.w)
	}
}

// runLine is the one-line account of a finished run: goodput against the
// target, error rate, success latency, the generator's send lag and the
// run's own validity verdict (its first reason when invalid). The
// algorithm is padded to width characters.
func runLine(r artifacts.Run, total, width int) string {
	head := fmt.Sprintf("[%02d/%02d] rep%d %-*s", r.Index, total, r.Rep, width, r.Algorithm)
	if r.Status != artifacts.StatusOK {
		return fmt.Sprintf("%s FAILED: %s", head, r.Error)
	}
	l := r.Load
	goodput := fmt.Sprintf("goodput %7.1f rps", l.Goodput)
	if l.TargetRate > 0 {
		goodput = fmt.Sprintf("goodput %7.1f/%.1f rps", l.Goodput, l.TargetRate)
	}
	validity := "valid"
	if !r.Validity.Valid {
		validity = "INVALID"
		if len(r.Validity.Reasons) > 0 {
			validity += ": " + r.Validity.Reasons[0]
			if more := len(r.Validity.Reasons) - 1; more > 0 {
				validity += fmt.Sprintf(" (+%d more)", more)
			}
		}
	}
	reset := "reset ok"
	if !r.ResetVerified {
		reset = "RESET NOT VERIFIED"
	}
	latency := fmt.Sprintf("success p50 %7.1f p99 %7.1f p99.9 %7.1f ms", l.P50, l.P99, l.P999)
	if l.Sent > 0 && l.Succeeded == 0 {
		latency = "no success, so no success latency"
	}
	return fmt.Sprintf("%s ok  %s  err %5.2f%%  %s  lag p99 %5.2f ms  %s  %s",
		head, goodput, 100*errorRate(l), latency, l.SendLag.P99, reset, validity)
}
