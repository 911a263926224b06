package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// KindFigures sums up the trials of one kind of fault.
type KindFigures struct {
	Kind Kind
	// Injected counts the trials whose fault was injected; Skipped those
	// whose job ended first or whose moment was not caught.
	Injected, Skipped int
	// Finished: jobs that finished despite the fault; Failed: jobs that
	// stopped or failed and named it; Recovered: jobs whose results (their own, or
	// their resumed or restarted job's) equal an uninterrupted run's.
	Finished, Failed, Recovered int
	// Detect and Recover are the median and largest times (detection only
	// for the jobs that failed).
	DetectMedian, DetectMax   time.Duration
	RecoverMedian, RecoverMax time.Duration
	// LostSteps sums the steps of complete checkpoints lost; Hangs counts
	// processes that outlived their bound; Violations every failed
	// invariant.
	LostSteps, Hangs, Violations int
}

// Figures returns the figures of each kind that has trials, in Kinds'
// order.
func (r Report) Figures() []KindFigures {
	var out []KindFigures
	for _, k := range Kinds {
		f := KindFigures{Kind: k}
		var detect, recover []time.Duration
		n := 0
		for _, t := range r.Trials {
			if t.Kind != k {
				continue
			}
			n++
			f.Violations += len(t.Violations)
			f.LostSteps += t.Lost
			if t.Hang {
				f.Hangs++
			}
			if t.Skipped != "" {
				f.Skipped++
				continue
			}
			f.Injected++
			switch t.Outcome {
			case "finished":
				f.Finished++
			case "failed", "stopped":
				if t.Message != "" {
					f.Failed++
					detect = append(detect, t.Detect)
				}
			}
			if t.Recovered {
				f.Recovered++
				recover = append(recover, t.Recover)
			}
		}
		if n == 0 {
			continue
		}
		f.DetectMedian, f.DetectMax = medianMax(detect)
		f.RecoverMedian, f.RecoverMax = medianMax(recover)
		out = append(out, f)
	}
	return out
}

// medianMax returns the median and the largest of ds (zeros when empty).
func medianMax(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, s[len(s)-1]
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// WriteMarkdown writes the report: a table of figures per kind of fault,
// the kinds that could not be injected here and why, and a line per trial.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Seed %d, %d trials in %v.\n\n", r.Seed, len(r.Trials), r.Elapsed.Round(time.Second))
	b.WriteString("| fault | injected | finished anyway | stopped or failed, naming it | recovered | detect (median, max) | recover (median, max) | checkpoint steps lost | hangs | violations |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|---:|---:|---:|\n")
	for _, f := range r.Figures() {
		injected := fmt.Sprint(f.Injected)
		if f.Skipped > 0 {
			injected += fmt.Sprintf(" (+%d not caught)", f.Skipped)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s, %s | %s, %s | %d | %d | %d |\n",
			f.Kind, injected, f.Finished, f.Failed, f.Recovered,
			seconds(f.DetectMedian), seconds(f.DetectMax), seconds(f.RecoverMedian), seconds(f.RecoverMax),
			f.LostSteps, f.Hangs, f.Violations)
	}
	if len(r.Unavailable) > 0 {
		b.WriteString("\nNot injected on this machine:\n\n")
		for _, k := range Kinds {
			if why, ok := r.Unavailable[k]; ok {
				fmt.Fprintf(&b, "- %s: %s\n", k, why)
			}
		}
	}
	b.WriteString("\nTrials:\n\n```\n")
	for _, t := range r.Trials {
		b.WriteString(t.line())
		b.WriteByte('\n')
	}
	b.WriteString("```\n")
	_, err := io.WriteString(w, b.String())
	return err
}
