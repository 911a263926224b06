package experiment

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flockml/flock/internal/term"
)

// Progress shows how far the grid is: runs done, running, and the
// time left at the mean duration of the runs this process finished. On a
// terminal one line is redrawn; otherwise a line is written per run.
type Progress struct {
	w        io.Writer
	terminal bool

	mu                         sync.Mutex
	total, done, skipped, jobs int
	running                    map[string]time.Time
	spent                      time.Duration
	finished                   int
}

// NewProgress returns the progress of a grid written to w, redrawn in
// place when terminal is set.
func NewProgress(w io.Writer, terminal bool) *Progress {
	return &Progress{w: w, terminal: terminal, running: map[string]time.Time{}}
}

func (p *Progress) start(total, done, jobs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done, p.skipped, p.jobs = total, done, done, jobs
	if done > 0 {
		fmt.Fprintf(p.w, "%d of %d runs already done\n", done, total)
	}
}

func (p *Progress) begin(r Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[r.ID] = time.Now()
	p.draw("")
}

// end marks r finished; rec is nil when it failed.
func (p *Progress) end(r Run, rec *Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	began := p.running[r.ID]
	delete(p.running, r.ID)
	if rec == nil {
		return
	}
	p.done++
	p.finished++
	p.spent += time.Since(began)
	p.draw(fmt.Sprintf("%-26s test acc %6.2f%%  sent %-10s  %s", r.ID, 100*rec.TestAcc, term.Bytes(rec.Comm.Sent), term.Seconds(rec.Wall)))
}

// eta is the time left: the runs left at the mean time of those finished,
// jobs at a time.
func (p *Progress) eta() string {
	if p.finished == 0 {
		return "ETA -"
	}
	left := p.total - p.done
	per := p.spent / time.Duration(p.finished)
	return "ETA " + (per * time.Duration(left) / time.Duration(max(1, p.jobs))).Round(time.Second).String()
}

// draw shows the state, after the line finished when it is not empty.
func (p *Progress) draw(finished string) {
	state := fmt.Sprintf("runs %d/%d done, %d running, %s", p.done, p.total, len(p.running), p.eta())
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
		if finished != "" {
			fmt.Fprintln(p.w, finished)
		}
		if len(p.running) > 0 {
			state += " — " + strings.Join(slices.Sorted(maps.Keys(p.running)), ", ")
		}
		fmt.Fprint(p.w, state)
		return
	}
	if finished != "" {
		fmt.Fprintf(p.w, "%s  [%s]\n", finished, state)
	}
}

func (p *Progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "runs %d/%d done\n", p.done, p.total)
}
