package plot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/flockml/flock/train"
)

// maxLine bounds a line of a log, far above what flock writes (a run
// record holds the whole configuration, a few KB).
const maxLine = 16 << 20

// Point is a run's value at a step.
type Point struct {
	Step, Value float64
}

// Run is what a run's log gives to plot: its curves against the steps.
type Run struct {
	// Name is the file's name without its extension for a flock train
	// log, the run's ID for a line of a grid's runs file; Strategy
	// describes how its workers cooperated ("" for one worker alone).
	Name, Strategy string
	// Loss is the training loss; TestAcc the test accuracy, a fraction;
	// H the length of each round of a local-update strategy at the step
	// that closes it; Sent the bytes a worker sent so far. Non-finite
	// values are left out.
	Loss, TestAcc, H, Sent []Point
}

// Label names the run in a legend: its name, and its strategy when known.
func (r Run) Label() string {
	if r.Strategy == "" || r.Strategy == r.Name {
		return r.Name
	}
	return r.Name + ": " + r.Strategy
}

// empty reports whether r has nothing to draw.
func (r Run) empty() bool {
	return len(r.Loss)+len(r.TestAcc)+len(r.H)+len(r.Sent) == 0
}

// lineHead is what tells the two formats' lines apart: the lines of a
// grid's runs file have a record field ("run"), flock train's records a
// kind and no record.
type lineHead struct {
	Kind   *string `json:"kind"`
	Record *string `json:"record"`
}

// gridRun holds what is drawn of a line of flock experiment's runs file
// (experiment.Record).
type gridRun struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Epochs int    `json:"epochs"`
	Steps  int    `json:"steps"`
	Curve  []struct {
		Epoch int     `json:"epoch"`
		Acc   float64 `json:"acc"`
	} `json:"curve"`
	H []struct {
		Step int `json:"step"`
		H    int `json:"h"`
	} `json:"h"`
	Comm train.CommStats `json:"comm"`
}

// trainRunRecord holds what is drawn of flock train's first record.
type trainRunRecord struct {
	Strategy string `json:"strategy"`
}

// Read reads the runs of a log from r, name being the file's path (for
// the runs' names and the errors): one run from the JSON Lines of flock
// train --json (a resumed run appended to the same file continues its
// curves), or each line's run from the runs file of flock experiment.
// Lines of other kinds (the summary, kinds added later) are skipped; a
// line that is not a JSON object of either format, a last line cut short,
// and a log with nothing to draw are errors that name the file and line.
func Read(r io.Reader, name string) ([]Run, error) {
	br := bufio.NewReader(r)
	var (
		log     = Run{Name: stem(name)}
		logSeen bool // a flock train record was read
		grid    []Run
	)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("plot: read %s:%d: %w", name, n, err)
		}
		truncated := err == io.EOF // no newline at the end
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("plot: %s:%d: %s", name, n, fmt.Sprintf(format, a...))
		}
		var head lineHead
		if err := json.Unmarshal(line, &head); err != nil {
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			switch {
			case errors.As(err, &se) && truncated:
				return nil, fail("not JSON: %v (the last line has no newline: cut short?)", err)
			case errors.As(err, &se):
				return nil, fail("not JSON: %v", err)
			case errors.As(err, &te) && te.Field == "":
				return nil, fail("a JSON %s, not an object", te.Value)
			}
			return nil, fail("%v", jsonError(err))
		}
		switch {
		case head.Record != nil:
			if *head.Record != "run" {
				return nil, fail("record %q, want a run of flock experiment's runs file", *head.Record)
			}
			if logSeen {
				return nil, fail("a flock experiment run among flock train records")
			}
			var g gridRun
			if err := json.Unmarshal(line, &g); err != nil {
				return nil, fail("run record: %v", jsonError(err))
			}
			grid = append(grid, g.run())
		case head.Kind != nil:
			if grid != nil {
				return nil, fail("a flock train record among flock experiment runs")
			}
			logSeen = true
			if err := log.add(*head.Kind, line); err != nil {
				return nil, fail("%s record: %v", *head.Kind, jsonError(err))
			}
		default:
			return nil, fail(`neither a flock train record (with "kind") nor a flock experiment run (with "record")`)
		}
		if truncated {
			break
		}
	}
	runs := grid
	if logSeen {
		runs = []Run{log}
	}
	for _, r := range runs {
		if r.empty() {
			what := "run " + r.Name
			if logSeen {
				what = "no training, evaluation or synchronization records"
			}
			return nil, fmt.Errorf("plot: %s: nothing to draw: %s", name, what)
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("plot: %s: no records (want the output of flock train --json or flock experiment's runs.jsonl)", name)
	}
	return runs, nil
}

// readLine returns the next line without its newline; io.EOF with a line
// means that the line had no newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// jsonError says what is wrong with a line in words of JSON, without the
// Go types encoding/json names.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("a JSON %s", te.Value)
		}
		return fmt.Errorf("field %s: a JSON %s", te.Field, te.Value)
	}
	return err
}

// add adds a flock train record of the given kind to the run.
func (r *Run) add(kind string, line []byte) error {
	switch kind {
	case "run":
		var rec trainRunRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		if r.Strategy == "" {
			r.Strategy = rec.Strategy
		}
	case train.KindTrain, train.KindEval, train.KindSync:
		// Null stands for NaN and ±Inf: such fields stay NaN and are
		// left out.
		rec := train.Record{Loss: math.NaN(), Acc: math.NaN()}
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		step := float64(rec.Step)
		switch kind {
		case train.KindTrain:
			r.Loss = appendFinite(r.Loss, step, rec.Loss)
			if rec.Comm != nil {
				r.Sent = appendFinite(r.Sent, step, float64(rec.Comm.Sent))
			}
		case train.KindEval:
			r.TestAcc = appendFinite(r.TestAcc, step, rec.Acc)
		case train.KindSync:
			if rec.H > 0 {
				r.H = append(r.H, Point{step, float64(rec.H)})
			}
		}
	}
	return nil
}

// run returns the curves of a grid's run: the test accuracy after each
// epoch, at the step that ends it; the rounds' H; and what a worker sent
// in all, at the last step.
func (g gridRun) run() Run {
	r := Run{Name: g.ID, Strategy: g.Label}
	if g.Epochs > 0 {
		perEpoch := float64(g.Steps) / float64(g.Epochs)
		for _, c := range g.Curve {
			r.TestAcc = appendFinite(r.TestAcc, float64(c.Epoch)*perEpoch, c.Acc)
		}
	}
	for _, h := range g.H {
		if h.H > 0 {
			r.H = append(r.H, Point{float64(h.Step), float64(h.H)})
		}
	}
	if g.Steps > 0 {
		r.Sent = append(r.Sent, Point{float64(g.Steps), float64(g.Comm.Sent)})
	}
	return r
}

// appendFinite appends (step, v) to ps unless v or step is NaN or
// infinite.
func appendFinite(ps []Point, step, v float64) []Point {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.IsNaN(step) || math.IsInf(step, 0) {
		return ps
	}
	return append(ps, Point{step, v})
}

// stem returns path's file name without its extension.
func stem(path string) string {
	base := filepath.Base(path)
	if s := strings.TrimSuffix(base, filepath.Ext(base)); s != "" {
		return s
	}
	return base
}

// ReadFiles reads the runs of the logs at paths (see Read), in order. Two
// logs of flock train whose file names are the same are named by their
// paths instead.
func ReadFiles(paths ...string) ([]Run, error) {
	stems := map[string]int{}
	for _, p := range paths {
		stems[stem(p)]++
	}
	var runs []Run
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		rs, err := Read(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		for i := range rs {
			if rs[i].Name == stem(p) && stems[stem(p)] > 1 {
				rs[i].Name = strings.TrimSuffix(p, filepath.Ext(p))
			}
		}
		runs = append(runs, rs...)
	}
	return runs, nil
}
