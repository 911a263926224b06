package plot

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// steps returns the steps of ps.
func steps(ps []Point) []float64 {
	var s []float64
	for _, p := range ps {
		s = append(s, p.Step)
	}
	return s
}

// values returns the values of ps.
func values(ps []Point) []float64 {
	var v []float64
	for _, p := range ps {
		v = append(v, p.Value)
	}
	return v
}

// TestReadTrainLogs reads the logs of flock train --json in testdata: one
// run each, named by the file, with its strategy and curves in the order
// of the records.
func TestReadTrainLogs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file, name, strategy string
		h                    []Point
		sent                 []float64
	}{
		{"local_h3.jsonl", "local_h3", "Local SGD (constant H = 3)", []Point{{3, 3}, {6, 3}, {9, 3}, {12, 3}},
			[]float64{0, 1077296, 2154592, 2154592, 3231888, 4309188}},
		{"dp.jsonl", "dp", "data parallel (gradients averaged every step)", nil,
			[]float64{2154576, 4309152, 6463728, 8618304, 10772880, 12927456}},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			runs, err := ReadFiles(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 1 {
				t.Fatalf("%d runs, want 1", len(runs))
			}
			r := runs[0]
			if r.Name != c.name || r.Strategy != c.strategy || r.Label() != c.name+": "+c.strategy {
				t.Errorf("name %q strategy %q label %q", r.Name, r.Strategy, r.Label())
			}
			if got, want := steps(r.Loss), []float64{2, 4, 6, 8, 10, 12}; !slices.Equal(got, want) {
				t.Errorf("loss at steps %v, want %v", got, want)
			}
			if l := values(r.Loss); l[0] < 2 || l[0] > 2.4 || l[5] > l[0]/1.5 {
				t.Errorf("losses %v: want about ln 10 falling", l)
			}
			if got, want := steps(r.TestAcc), []float64{6, 12}; !slices.Equal(got, want) {
				t.Errorf("test accuracy at steps %v, want %v", got, want)
			}
			if a := values(r.TestAcc); a[0] < 0.3 || a[1] > 1 {
				t.Errorf("test accuracies %v, want fractions above chance", a)
			}
			if !slices.Equal(r.H, c.h) {
				t.Errorf("H %v, want %v", r.H, c.h)
			}
			if got := values(r.Sent); !slices.Equal(got, c.sent) || !slices.Equal(steps(r.Sent), steps(r.Loss)) {
				t.Errorf("sent %v at steps %v, want %v at the training records' steps", got, steps(r.Sent), c.sent)
			}
		})
	}
}

// TestReadGrid reads a grid's runs file: a run per line, its accuracy
// after each epoch at the epoch's last step.
func TestReadGrid(t *testing.T) {
	t.Parallel()
	runs, err := ReadFiles(filepath.Join("testdata", "grid_runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	dp, qsr := runs[0], runs[1]
	if dp.Label() != "dp/seed1: Data parallel" || qsr.Label() != "local-qsr/seed1: Local SGD, QSR (H ∝ η⁻²)" {
		t.Errorf("labels %q, %q", dp.Label(), qsr.Label())
	}
	for _, r := range runs {
		if r.Loss != nil || !slices.Equal(steps(r.TestAcc), []float64{8, 16}) || len(r.Sent) != 1 || r.Sent[0].Step != 16 {
			t.Errorf("%s: loss %v, accuracy %v, sent %v", r.Name, r.Loss, r.TestAcc, r.Sent)
		}
	}
	if want := []Point{{16, 17236608}}; !slices.Equal(dp.Sent, want) || dp.H != nil {
		t.Errorf("dp: sent %v (want %v), H %v", dp.Sent, want, dp.H)
	}
	if want := []Point{{2, 2}, {4, 2}, {6, 2}, {8, 2}, {12, 4}, {16, 4}}; !slices.Equal(qsr.H, want) {
		t.Errorf("local-qsr: H %v, want %v", qsr.H, want)
	}
	if want := []Point{{8, 0.5299}, {16, 0.6422}}; !slices.Equal(qsr.TestAcc, want) {
		t.Errorf("local-qsr: accuracy %v, want %v", qsr.TestAcc, want)
	}
}

// TestReadValues checks what Read makes of odd but valid logs: null
// values left out, blank lines and unknown kinds skipped, a last line
// without its newline kept when whole, a resumed run continuing its file.
func TestReadValues(t *testing.T) {
	t.Parallel()
	log := `{"kind":"run","strategy":"Local SGD"}

{"kind":"train","step":1,"loss":null,"acc":null,"comm":{"bytes_sent":10,"consensus":null}}
{"kind":"train","step":2,"loss":1.5,"acc":0.5}
{"kind":"later","step":9,"loss":7}
{"kind":"eval","step":2,"loss":1,"acc":null}
{"kind":"summary","steps":2}
{"kind":"run","strategy":"another"}
{"kind":"sync","step":2,"h":0}
{"kind":"sync","step":3,"h":2}` // no newline
	runs, err := Read(strings.NewReader(log), "dir/a.b.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := Run{Name: "a.b", Strategy: "Local SGD", Loss: []Point{{2, 1.5}}, H: []Point{{3, 2}}, Sent: []Point{{1, 10}}}
	if len(runs) != 1 || !sameRun(runs[0], want) {
		t.Errorf("runs %+v, want %+v", runs, want)
	}
}

// sameRun reports whether a and b hold the same name, strategy and points.
func sameRun(a, b Run) bool {
	return a.Name == b.Name && a.Strategy == b.Strategy && slices.Equal(a.Loss, b.Loss) &&
		slices.Equal(a.TestAcc, b.TestAcc) && slices.Equal(a.H, b.H) && slices.Equal(a.Sent, b.Sent)
}

// TestReadErrors checks that bad logs are refused with the file, the line
// and what is wrong.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	good := `{"kind":"train","step":1,"loss":2}` + "\n"
	grid := `{"record":"run","id":"a","epochs":1,"steps":4,"curve":[{"epoch":1,"acc":0.5}]}` + "\n"
	for _, c := range []struct {
		name, log string
		want      []string
	}{
		{"empty", "", []string{"plot: f.jsonl: no records"}},
		{"blank lines", "\n \n", []string{"plot: f.jsonl: no records"}},
		{"not JSON", good + "hello\n", []string{"plot: f.jsonl:2: not JSON: invalid character 'h'"}},
		{"array", "[1, 2]\n", []string{"f.jsonl:1: a JSON array, not an object"}},
		{"cut short", good + `{"kind":"train","st`, []string{"f.jsonl:2: not JSON: unexpected end of JSON input", "no newline: cut short?"}},
		{"cut short at a value", good + `{"kind":"train","step":`, []string{"f.jsonl:2:", "cut short?"}},
		{"neither format", good + `{"step":3}` + "\n", []string{`f.jsonl:2: neither a flock train record (with "kind") nor a flock experiment run (with "record")`}},
		{"bad kind", `{"kind":3}` + "\n", []string{"f.jsonl:1: field kind: a JSON number"}},
		{"bad field", good + `{"kind":"train","step":2,"loss":"low"}` + "\n", []string{"f.jsonl:2: train record: field loss: a JSON string"}},
		{"fractional step", `{"kind":"eval","step":1.5}` + "\n", []string{"f.jsonl:1: eval record: field step: a JSON number 1.5"}},
		{"bad comm", `{"kind":"train","step":2,"comm":[]}` + "\n", []string{"f.jsonl:1: train record: field comm: a JSON array"}},
		{"run record only", `{"kind":"run","strategy":"dp"}` + "\n" + `{"kind":"summary"}` + "\n",
			[]string{"plot: f.jsonl: nothing to draw: no training, evaluation or synchronization records"}},
		{"other record", `{"record":"grid"}` + "\n", []string{`f.jsonl:1: record "grid", want a run of flock experiment's runs file`}},
		{"grid then train", grid + good, []string{"f.jsonl:2: a flock train record among flock experiment runs"}},
		{"train then grid", good + grid, []string{"f.jsonl:2: a flock experiment run among flock train records"}},
		{"bad grid", `{"record":"run","curve":{}}` + "\n", []string{"f.jsonl:1: run record: field curve: a JSON object"}},
		{"empty grid run", grid + `{"record":"run","id":"b"}` + "\n", []string{"plot: f.jsonl: nothing to draw: run b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.log), "f.jsonl")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestReadFiles checks the names of logs whose file names are the same,
// and the error for a file that is not there.
func TestReadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "dp.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, sub := range []string{"a", "b"} {
		p := filepath.Join(dir, sub, "run.jsonl")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	runs, err := ReadFiles(append(paths, filepath.Join("testdata", "local_h3.jsonl"))...)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
	}
	if want := []string{filepath.Join(dir, "a", "run"), filepath.Join(dir, "b", "run"), "local_h3"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	missing := filepath.Join(dir, "none.jsonl")
	if _, err := ReadFiles(missing); err == nil || !strings.Contains(err.Error(), "plot: open "+missing) {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzRead feeds Read arbitrary logs: it returns an error or runs that
// each have points to draw, all of them finite.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"local_h3.jsonl", "dp.jsonl", "grid_runs.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"train","step":1,"loss":null}` + "\n" + `{"kind":"sync","step":2,"h":4}`))
	f.Add([]byte(`{"record":"run","id":"x","epochs":0,"steps":3,"h":[{"step":1,"h":-1}]}`))
	f.Add([]byte("{\"kind\":\"eval\",\"step\":-9223372036854775808,\"acc\":1e308}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, err := Read(strings.NewReader(string(data)), "fuzz.jsonl")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "plot: fuzz.jsonl") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if len(runs) == 0 {
			t.Fatal("no runs and no error")
		}
		for _, r := range runs {
			if r.empty() {
				t.Errorf("run %q has nothing to draw", r.Name)
			}
			for _, ps := range [][]Point{r.Loss, r.TestAcc, r.H, r.Sent} {
				for _, p := range ps {
					if math.IsNaN(p.Step+p.Value) || math.IsInf(p.Step, 0) || math.IsInf(p.Value, 0) {
						t.Errorf("run %q: point %v", r.Name, p)
					}
				}
			}
		}
	})
}
