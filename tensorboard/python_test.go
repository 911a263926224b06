package tensorboard

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/internal/peers"
)

// The tests of this file hold the package to the tensorboard Python
// package, pinned in bench/peers/requirements.txt: its writer made
// testdata/python.tfevents, and its EventAccumulator reads what Writer
// writes. Those that run Python skip without the peers' environment
// (bench/peers/setup.sh, or $FLOCK_PEERS_VENV naming one with tensorboard
// installed).

var update = flag.Bool("update", false, "rewrite testdata/python.tfevents with the tensorboard package's EventFileWriter")

// goldenFile was written by the tensorboard package from goldenEvents.
const goldenFile = "testdata/python.tfevents"

// goldenEvent is an event of goldenFile.
type goldenEvent struct {
	wall   float64
	step   int64
	values []Value
}

// goldenEvents cover zero and negative steps, a step past 32 bits, values
// that are zero, negative, tiny, huge or not finite, several values in an
// event, tags of several bytes per character and a tag whose length takes
// two bytes as a varint.
var goldenEvents = []goldenEvent{
	{1700000000.25, 0, []Value{{"loss", 2.5}}},
	{1700000001.5, 1, []Value{{"loss", 0}, {"acc", -0.125}}},
	{1700000002.75, 300, []Value{{"train/lr", 1e-30}, {"λ/ü", math.NaN()}}},
	{1700000003, 1 << 40, []Value{{"x", math.Inf(1)}, {"y", math.Inf(-1)}}},
	{1700000004, -5, []Value{{"neg", 3.4e38}}},
	{1700000005.125, 7, []Value{{strings.Repeat("t", 200), 1}}},
}

// tensorBoardPython returns the peers' Python, or skips t when it is
// missing or cannot import tensorboard.
func tensorBoardPython(t *testing.T) string {
	t.Helper()
	python, err := peers.Python(".")
	if err != nil {
		t.Skipf("tensorboard package: %v", err)
	}
	out, err := exec.Command(python, "-c", "import tensorboard; print(tensorboard.__version__)").CombinedOutput()
	if err != nil {
		t.Skipf("tensorboard package: %s cannot import it (%v): install the peers with %s", python, err, peers.Setup)
	}
	t.Logf("tensorboard %s", strings.TrimSpace(string(out)))
	return python
}

// pyFloat writes x as a Python float expression.
func pyFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return `float("nan")`
	case math.IsInf(x, 1):
		return `float("inf")`
	case math.IsInf(x, -1):
		return `float("-inf")`
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// goldenScript is the Python program that writes goldenEvents into the
// directory of its first argument, with the tensorboard package's own
// writer.
func goldenScript() string {
	var evs []string
	for _, e := range goldenEvents {
		var vs []string
		for _, v := range e.values {
			vs = append(vs, fmt.Sprintf("(%s, %s)", strconv.QuoteToASCII(v.Tag), pyFloat(v.Value)))
		}
		evs = append(evs, fmt.Sprintf("(%s, %d, [%s])", pyFloat(e.wall), e.step, strings.Join(vs, ", ")))
	}
	return `import sys
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
w = EventFileWriter(sys.argv[1])
for wall, step, values in [` + strings.Join(evs, ",\n    ") + `]:
    s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
    w.add_event(event_pb2.Event(wall_time=wall, step=step, summary=s))
w.close()
`
}

// writeGolden runs goldenScript and returns the path of the file it made.
func writeGolden(t *testing.T, python string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(python, "-c", goldenScript(), dir).CombinedOutput(); err != nil {
		t.Fatalf("golden script: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("golden script wrote %v (%v), want one event file", files, err)
	}
	return files[0]
}

// sameFloat32 reports whether got is want as a float32, NaN equal to NaN.
func sameFloat32(got, want float64) bool {
	w := float64(float32(want))
	return got == w || math.IsNaN(got) && math.IsNaN(w)
}

// checkGolden checks that path holds goldenEvents after the version event,
// and that this package encodes each event to the same bytes.
func checkGolden(t *testing.T, path string) {
	t.Helper()
	evs, err := readEventFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1+len(goldenEvents) {
		t.Fatalf("%s: %d events, want %d", path, len(evs), 1+len(goldenEvents))
	}
	if v := evs[0]; v.Version != FileVersion || v.Summary || v.Wall < 1.7e9 {
		t.Errorf("first event %+v, want file_version %s and a wall time", v, FileVersion)
	}
	// The package's writer follows the version with source_metadata
	// (field 10), naming itself.
	if got := appendVersionEvent(nil, evs[0].Wall); !bytes.HasPrefix(evs[0].Data, got) {
		t.Errorf("version event encodes to\n%x, the package's to\n%x", got, evs[0].Data)
	}
	for i, want := range goldenEvents {
		got := evs[i+1]
		if got.Wall != want.wall || got.Step != want.step || got.Version != "" || len(got.Values) != len(want.values) {
			t.Errorf("event %d: %+v, want %+v", i+1, got, want)
			continue
		}
		for j, v := range got.Values {
			if v.Tag != want.values[j].Tag || !sameFloat32(v.Value, want.values[j].Value) {
				t.Errorf("event %d value %d: %q = %g, want %q = %g", i+1, j, v.Tag, v.Value, want.values[j].Tag, want.values[j].Value)
			}
		}
		if enc := appendScalarEvent(nil, want.wall, want.step, want.values); !bytes.Equal(enc, got.Data) {
			t.Errorf("event %d encodes to\n%x, the package's to\n%x", i+1, enc, got.Data)
		}
	}
}

// TestGolden reads the event file the tensorboard package wrote (and,
// with Python at hand, one it writes now): the checksums hold, the events
// are goldenEvents, and each encodes here to the package's bytes. With
// -update the committed file is written again.
func TestGolden(t *testing.T) {
	t.Parallel()
	if *update {
		b, err := os.ReadFile(writeGolden(t, tensorBoardPython(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkGolden(t, goldenFile)
	if !*update {
		t.Run("fresh", func(t *testing.T) {
			checkGolden(t, writeGolden(t, tensorBoardPython(t)))
		})
	}
}

// accumulatorScript prints what TensorBoard's EventAccumulator reads from
// the event file of its first argument: each scalar tag's events as
// [step, wall time, value], the value as Python's repr (nan and inf
// included).
const accumulatorScript = `import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0})
acc.Reload()
print(json.dumps({tag: [[e.step, e.wall_time, repr(e.value)] for e in acc.Scalars(tag)]
                  for tag in acc.Tags()[ea.SCALARS]}))
`

// TestEventAccumulator writes scalars with Writer and checks that
// TensorBoard's EventAccumulator reads back every tag with its steps,
// wall times and values in order.
func TestEventAccumulator(t *testing.T) {
	t.Parallel()
	python := tensorBoardPython(t)
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		step  int64
		wall  float64
		value float64
	}
	want := map[string][]point{}
	wall := time.Unix(1700000000, 500_000_000)
	add := func(step int64, vs ...Value) {
		if err := w.Scalars(step, wall, vs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			want[v.Tag] = append(want[v.Tag], point{step, wallTime(wall), v.Value})
		}
		wall = wall.Add(1250 * time.Millisecond)
	}
	for step := range int64(20) {
		add(10*step, Value{"train/loss", 2 / float64(step+1)}, Value{"train/lr", 0.1 * float64(step)})
		if step%5 == 4 {
			add(10*step, Value{"eval/accuracy", 0.5 + float64(step)/100})
		}
	}
	add(1<<35, Value{"train/loss", math.NaN()}, Value{"comm/bytes_sent", 123456789}, Value{"λ", math.Inf(-1)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(python, "-c", accumulatorScript, w.Path()).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("EventAccumulator: %v\n%s", err, stderr)
	}
	var got map[string][][3]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("EventAccumulator's output %q: %v", out, err)
	}
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("tags %q, want %q", g, w)
	}
	for tag, ps := range want {
		if len(got[tag]) != len(ps) {
			t.Errorf("%s: %d events, want %d", tag, len(got[tag]), len(ps))
			continue
		}
		for i, p := range ps {
			g := got[tag][i]
			step, _ := g[0].(float64)
			wall, _ := g[1].(float64)
			repr, _ := g[2].(string)
			v, err := strconv.ParseFloat(repr, 64)
			if err != nil || int64(step) != p.step || wall != p.wall || !sameFloat32(v, p.value) {
				t.Errorf("%s event %d: step %v, wall %v, value %v; want %d, %v, %g", tag, i, g[0], g[1], g[2], p.step, p.wall, p.value)
			}
		}
	}
}
