package chaos

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestChaos is the suite's short form: one round, every kind of fault this
// machine allows once, each on another strategy, and not one invariant
// may fail. `flock chaos` runs the long form.
func TestChaos(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the suite reads /proc and starts Linux processes")
	}
	bin := filepath.Join(t.TempDir(), "flock")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/flockml/flock/cmd/flock").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var log strings.Builder
	rep, err := Run(context.Background(), Options{
		Flock: bin, Seed: 1, Rounds: 1, Timeout: 6 * time.Second, Log: &log,
	})
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	for k, why := range rep.Unavailable {
		t.Logf("%s not injected: %s", k, why)
	}
	if n := len(Kinds) - len(rep.Unavailable); len(rep.Trials) != n {
		t.Errorf("%d trials, want one per kind that can be injected here (%d)", len(rep.Trials), n)
	}
	seen := map[Kind]bool{}
	for _, tr := range rep.Trials {
		if seen[tr.Kind] {
			t.Errorf("%s struck twice in one round", tr.Kind)
		}
		seen[tr.Kind] = true
	}
	for _, v := range rep.Violations() {
		t.Error(v)
	}
	for _, f := range rep.Figures() {
		if f.Hangs > 0 || f.LostSteps > 0 {
			t.Errorf("%s: %d hangs, %d checkpoint steps lost", f.Kind, f.Hangs, f.LostSteps)
		}
	}
}

func TestCompare(t *testing.T) {
	rec := func(kind string, step int, loss float64) record {
		r := record{Kind: kind, Step: step, Loss: loss, Steps: step}
		return r
	}
	ref := []record{rec("train", 1, 2.0), rec("train", 2, 1.5), rec("eval", 2, 1.4), rec("train", 3, 1.2), rec("summary", 3, 0)}
	ref[4].Comm.Syncs, ref[4].Comm.BytesSent = 3, 300
	same := []record{ref[1], ref[2], ref[3], ref[4]}
	if d := compare(ref, same, 1); d != "" {
		t.Errorf("records after step 1 equal to the reference: %s", d)
	}
	if d := compare(ref, same, 0); d == "" {
		t.Error("a run lacking step 1 compared from step 0: no difference reported")
	}
	other := []record{ref[1], rec("eval", 2, 1.4000001), ref[3], ref[4]}
	if d := compare(ref, other, 1); !strings.Contains(d, "eval step 2") {
		t.Errorf("an eval loss that differs: %q", d)
	}
	bytes := []record{ref[1], ref[2], ref[3], ref[4]}
	bytes[3].Comm.BytesSent = 200
	if d := compare(ref, bytes, 1); !strings.Contains(d, "bytes") {
		t.Errorf("a summary with other bytes: %q", d)
	}
}

func TestCheckpointStep(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "run.ckpt")
	m, _ := json.Marshal(map[string]any{"format": "flock-train-checkpoint-set", "step": 12, "files": []string{"a", "b"}})
	os.WriteFile(set, m, 0o644)
	os.WriteFile(filepath.Join(dir, "a"), nil, 0o644)
	if _, err := checkpointStep(set); err == nil {
		t.Error("a manifest naming a missing file read as complete")
	}
	os.WriteFile(filepath.Join(dir, "b"), nil, 0o644)
	if s, err := checkpointStep(set); s != 12 || err != nil {
		t.Errorf("manifest: step %d, %v; want 12", s, err)
	}

	single := filepath.Join(dir, "one.safetensors")
	hdr, _ := json.Marshal(map[string]any{"__metadata__": map[string]string{"step": "7"}})
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	os.WriteFile(single, append(b, hdr...), 0o644)
	if s, err := checkpointStep(single); s != 7 || err != nil {
		t.Errorf("safetensors file: step %d, %v; want 7", s, err)
	}
	os.WriteFile(single, b[:5], 0o644)
	if _, err := checkpointStep(single); err == nil {
		t.Error("a truncated file read as a checkpoint")
	}
}

func TestNaming(t *testing.T) {
	at := time.Now()
	log := []logLine{
		{at.Add(-time.Second), "flock run: rank 1 was killed by signal killed"},
		{at.Add(time.Millisecond), "[0] dist: all-reduce: rank 1: connection closed by peer: EOF"},
		{at.Add(2 * time.Millisecond), "flock run: rank 0 exited with status 1; rank 1 was killed by signal killed; stopped 1 other rank(s)"},
	}
	line, when, ok := naming(KillStep, 1, log, at)
	if !ok || when != log[2].at || !strings.Contains(line, "rank 1 was killed") {
		t.Errorf("naming: %q at %v, %v; want the launcher's line after the fault", line, when, ok)
	}
	if _, _, ok := naming(KillStep, 0, log, at); ok {
		t.Error("a line naming rank 1 named the kill of rank 0")
	}
	if _, _, ok := naming(DiskFull, 0, log, at); ok {
		t.Error("no line speaks of a full disk, yet one named it")
	}
}

func TestMedianMax(t *testing.T) {
	m, x := medianMax([]time.Duration{5, 1, 3, 2})
	if m != 2 || x != 5 {
		t.Errorf("median %v, max %v; want 2 (of 2 and 3, rounded down) and 5", m, x)
	}
	if m, x := medianMax(nil); m != 0 || x != 0 {
		t.Errorf("empty: %v %v", m, x)
	}
}
