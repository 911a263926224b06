package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/job"
	"github.com/flockml/flock/tensorboard"
	"github.com/flockml/flock/train"
)

// tbEvent is an event read back from an event file: its step and scalars.
type tbEvent struct {
	step   int64
	values []tensorboard.Value
}

// readTensorBoardDir reads the one event file in dir: TFRecords whose
// masked CRC-32Cs hold, a first event of file_version brain.Event:2, then
// scalar events (Event step 2, summary 5; Summary value 1; Value tag 1,
// simple_value 2).
func readTensorBoardDir(t *testing.T, dir string) []tbEvent {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("%s holds event files %q (%v), want one", dir, files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	mask := func(p []byte) uint32 {
		c := crc32.Checksum(p, table)
		return (c>>15 | c<<17) + 0xa282ead8
	}
	// fields calls f with each field of a message: its number, and its
	// varint, fixed or length-delimited value.
	fields := func(m []byte, f func(num int, x uint64, p []byte)) {
		for len(m) > 0 {
			key, n := binary.Uvarint(m)
			if n <= 0 {
				t.Fatalf("%s: bad field key", files[0])
			}
			m = m[n:]
			var x uint64
			var p []byte
			switch key & 7 {
			case 0:
				x, n = binary.Uvarint(m)
			case 1:
				x, n = binary.LittleEndian.Uint64(m), 8
			case 2:
				var l uint64
				l, n = binary.Uvarint(m)
				p, n = m[n:n+int(l)], n+int(l)
			case 5:
				x, n = uint64(binary.LittleEndian.Uint32(m)), 4
			default:
				t.Fatalf("%s: wire type %d", files[0], key&7)
			}
			m = m[n:]
			f(int(key>>3), x, p)
		}
	}
	var evs []tbEvent
	for len(b) > 0 {
		n := binary.LittleEndian.Uint64(b)
		if binary.LittleEndian.Uint32(b[8:]) != mask(b[:8]) {
			t.Fatalf("%s: bad length CRC", files[0])
		}
		data := b[12 : 12+n]
		if binary.LittleEndian.Uint32(b[12+n:]) != mask(data) {
			t.Fatalf("%s: bad data CRC", files[0])
		}
		b = b[16+n:]
		var e tbEvent
		version := ""
		fields(data, func(num int, x uint64, p []byte) {
			switch num {
			case 2:
				e.step = int64(x)
			case 3:
				version = string(p)
			case 5:
				fields(p, func(_ int, _ uint64, v []byte) {
					var val tensorboard.Value
					fields(v, func(num int, x uint64, p []byte) {
						switch num {
						case 1:
							val.Tag = string(p)
						case 2:
							val.Value = float64(math.Float32frombits(uint32(x)))
						}
					})
					e.values = append(e.values, val)
				})
			}
		})
		if (len(evs) == 0) != (version == tensorboard.FileVersion) {
			t.Fatalf("%s: event %d has file_version %q", files[0], len(evs), version)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		t.Fatalf("%s: no events", files[0])
	}
	return evs[1:]
}

// tensorBoardArgs is a short run of two workers (Local SGD, a
// synchronization every 4 steps) on the small FFCV Fashion-MNIST file,
// with a test set: training, evaluation and synchronization records.
func tensorBoardArgs(t *testing.T) []string {
	t.Helper()
	data, err := filepath.Abs(filepath.Join(ffcvTestdata, "fmnist_500_ndarray.beton"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"train", "--data", data, "--test-data", data, "--model", "mlp", "--epochs", "2", "--batch-size", "25",
		"--lr", "0.1", "--log-every", "3", "--sync", "constant", "--h", "4", "--threads", "1", "--json"}
}

// checkTensorBoardRun checks that the event file in dir holds, in order,
// the scalars of each train, eval and sync record of the JSON Lines out.
func checkTensorBoardRun(t *testing.T, dir string, out []byte) {
	t.Helper()
	var want []tbEvent
	kinds := map[string]int{}
	for line := range bytes.Lines(out) {
		var rec train.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch rec.Kind {
		case train.KindTrain, train.KindEval, train.KindSync:
			kinds[rec.Kind]++
			want = append(want, tbEvent{int64(rec.Step), job.TensorBoardValues(rec)})
		}
	}
	if kinds[train.KindTrain] == 0 || kinds[train.KindEval] != 2 || kinds[train.KindSync] == 0 {
		t.Fatalf("records by kind %v: want train, two eval and sync records", kinds)
	}
	got := readTensorBoardDir(t, dir)
	if len(got) != len(want) {
		t.Fatalf("%d events, want one per record: %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		same := g.step == w.step && slices.EqualFunc(g.values, w.values, func(a, b tensorboard.Value) bool {
			return a.Tag == b.Tag && a.Value == float64(float32(b.Value))
		})
		if !same {
			t.Errorf("event %d: step %d %v, want step %d %v", i, g.step, g.values, w.step, w.values)
		}
	}
}

// TestTensorBoardTrain runs flock train --tensorboard with two in-process
// workers and reads the event file back against the --json records.
func TestTensorBoardTrain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "local")
	var stdout, stderr bytes.Buffer
	args := append(tensorBoardArgs(t), "--workers", "2", "--tensorboard", dir)
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	checkTensorBoardRun(t, dir, stdout.Bytes())
}

// TestTensorBoardLaunched runs the same training as two processes under
// flock run: rank 0 alone writes the event file.
func TestTensorBoardLaunched(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flock and starts a two-rank job; skipped in -short mode")
	}
	bin := flockBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append([]string{"run", "--nproc", "2", "--", bin}, append(tensorBoardArgs(t), "--tensorboard", dir)...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Env = append(os.Environ(), "FLOCK_JOB_TOKEN=tensorboard-test-token-0123456789abcdef", "MASTER_PORT="+freePort(t), "FLOCK_TIMEOUT=60s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("flock %s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	// flock run prefixes each line with its rank: rank 0's are the run's.
	var out []byte
	for line := range bytes.Lines(stdout.Bytes()) {
		if rest, ok := bytes.CutPrefix(line, []byte("[0] ")); ok {
			out = append(out, rest...)
		}
	}
	checkTensorBoardRun(t, dir, out)
}

// TestTensorBoardFailure checks that a --tensorboard directory that cannot
// be made fails the run at its start, in one line that names it.
func TestTensorBoardFailure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "runs")
	args := append(tensorBoardArgs(t), "--workers", "2", "--tensorboard", dir)
	runCLICases(t, []cliCase{
		{"not a directory", args, exitFailure, nil, []string{fmt.Sprintf("flock train: tensorboard: mkdir %s: not a directory", file)}, false},
	})
}
