package tensorboard

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWriter writes events of every kind of step and value and reads them
// back: the file's name, its version event, each event's fields, and what
// is on disk after Flush, before Close.
func TestWriter(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "runs", "a")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^events\.out\.tfevents\.\d{10}\.[^/]+\.\d+\.\d+$`)
	if base := filepath.Base(w.Path()); filepath.Dir(w.Path()) != dir || !name.MatchString(base) {
		t.Errorf("path %s, want %s/events.out.tfevents.<seconds>.<host>.<pid>.<n>", w.Path(), dir)
	}
	long := strings.Repeat("é", 100) // 200 bytes: a two-byte length
	wall := time.Unix(1700000000, 123_000_000)
	cases := []struct {
		step   int64
		values []Value
	}{
		{0, []Value{{"loss", 2.25}}},
		{1, []Value{{"loss", 0}, {"acc", 1}, {"lr", 1e-3}}},
		{127, []Value{{"nan", math.NaN()}, {"inf", math.Inf(1)}, {"-inf", math.Inf(-1)}}},
		{128, []Value{{"big", 1e300}, {"tiny", -1e-300}}},
		{-1, []Value{{long, -3}}},
		{math.MaxInt64, []Value{{"a/b/c", 7}}},
	}
	for i, c := range cases {
		if err := w.Scalars(c.step, wall.Add(time.Duration(i)*time.Second), c.values...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Scalars(5, wall); err != nil { // no values: no event
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func(evs []testEvent) {
		t.Helper()
		if len(evs) != 1+len(cases) {
			t.Fatalf("%d events, want %d", len(evs), 1+len(cases))
		}
		if evs[0].Version != FileVersion || evs[0].Summary || evs[0].Step != 0 || time.Since(time.Unix(int64(evs[0].Wall), 0)) > time.Hour {
			t.Errorf("first event %+v, want the file version at about now", evs[0])
		}
		for i, c := range cases {
			e := evs[i+1]
			if e.Step != c.step || e.Version != "" || !e.Summary || e.Wall != wallTime(wall.Add(time.Duration(i)*time.Second)) {
				t.Errorf("event %d: step %d wall %v, want %d, %v", i+1, e.Step, e.Wall, c.step, wall.Add(time.Duration(i)*time.Second))
			}
			if len(e.Values) != len(c.values) {
				t.Errorf("event %d: %d values, want %d", i+1, len(e.Values), len(c.values))
				continue
			}
			for j, v := range e.Values {
				want := c.values[j]
				if v.Tag != want.Tag || !sameFloat32(v.Value, want.Value) {
					t.Errorf("event %d: %q = %g, want %q = %g", i+1, v.Tag, v.Value, want.Tag, float32(want.Value))
				}
			}
		}
	}
	flushed, err := readEventFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	check(flushed)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	closed, err := readEventFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	check(closed)

	if err := w.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v, want os.ErrClosed", err)
	}
	if err := w.Scalar("loss", 9, 1, time.Time{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Scalar after Close: %v, want os.ErrClosed", err)
	}
	if err := w.Flush(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Flush after Close: %v, want os.ErrClosed", err)
	}
}

// TestWriterNow checks that a zero wall time is taken as now.
func TestWriterNow(t *testing.T) {
	t.Parallel()
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := w.Scalar("x", 3, 1.5, time.Time{}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := readEventFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Wall < wallTime(before)-1e-6 || evs[1].Wall > wallTime(after)+1e-6 {
		t.Errorf("events %+v, want one at a wall time in [%v, %v]", evs, before, after)
	}
}

// TestWriterBadTags checks that an empty tag or one that is not UTF-8 is
// refused and writes nothing, not even the event's other values.
func TestWriterBadTags(t *testing.T) {
	t.Parallel()
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"", "a\xffb"} {
		if err := w.Scalars(1, time.Time{}, Value{"ok", 1}, Value{tag, 2}); err == nil {
			t.Errorf("tag %q accepted", tag)
		}
	}
	if err := w.Scalar("ok", 2, 3, time.Time{}); err != nil {
		t.Errorf("a good tag after bad ones: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := readEventFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Step != 2 {
		t.Errorf("events %+v, want the version and the step 2 event", evs)
	}
}

// TestWriterFiles checks that writers started together in one directory
// get files of their own, and that a directory that cannot be made is an
// error.
func TestWriterFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seen := map[string]bool{}
	var ws []*Writer
	for range 5 {
		w, err := Create(dir)
		if err != nil {
			t.Fatal(err)
		}
		if seen[w.Path()] {
			t.Errorf("two writers on %s", w.Path())
		}
		seen[w.Path()] = true
		ws = append(ws, w)
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(filepath.Join(file, "sub")); err == nil || !strings.HasPrefix(err.Error(), "tensorboard: ") {
		t.Errorf("Create below a file: %v, want a tensorboard error", err)
	}
}

// TestWriterBuffer checks that events beyond the buffer reach the file
// without Flush, and that writers of several goroutines interleave whole
// events.
func TestWriterBuffer(t *testing.T) {
	t.Parallel()
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 4, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := w.Scalar(string(rune('a'+g)), int64(i), float64(i), time.Time{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	fi, err := os.Stat(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < bufferSize {
		t.Errorf("%d bytes on disk before Flush, want at least %d", fi.Size(), bufferSize)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := readEventFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int64{}
	for _, e := range evs[1:] {
		tag := e.Values[0].Tag
		if e.Step != next[tag] || e.Values[0].Value != float64(e.Step) {
			t.Fatalf("%s: step %d value %g, want step %d", tag, e.Step, e.Values[0].Value, next[tag])
		}
		next[tag]++
	}
	if len(evs) != 1+goroutines*each {
		t.Errorf("%d events, want %d", len(evs), 1+goroutines*each)
	}
}

// TestEncodingSizes checks the sizes the encoder computes ahead against
// the bytes it writes, across the one- to three-byte varint lengths.
func TestEncodingSizes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 100, 107, 108, 127, 128, 300, 16383, 16384, 20000} {
		values := []Value{{strings.Repeat("x", n), 1}}
		if n > 0 {
			values = append(values, Value{"y", 2})
		} else {
			values[0].Tag = "z"
		}
		data := appendScalarEvent(nil, 1.5, 3, values)
		e, err := decodeEvent(data)
		if err != nil {
			t.Fatalf("tag of %d bytes: %v", n, err)
		}
		if len(e.Values) != len(values) || e.Values[0].Tag != values[0].Tag || e.Step != 3 || e.Wall != 1.5 {
			t.Errorf("tag of %d bytes: decoded %d values, step %d, wall %g", n, len(e.Values), e.Step, e.Wall)
		}
	}
	for _, x := range []uint64{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1<<63 - 1, math.MaxUint64} {
		if got, want := uvarintSize(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("uvarintSize(%d) = %d, want %d", x, got, want)
		}
	}
}
