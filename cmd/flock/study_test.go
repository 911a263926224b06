package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/experiment"
)

// argValue returns the value of flag name in args ("" when absent).
func argValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestStudyQuick runs the QSR study's quick form end to end: tuning runs
// evaluate on images held out of the training set, each arm's runs at its
// chosen rate train on all of them at the rate of its best validation
// accuracy, the matched arms synchronize as often as QSR, and the report
// is written; a second start trains nothing.
func TestStudyQuick(t *testing.T) {
	needData(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"experiment", "qsr", "--quick", "--rates", "0.05,0.2", "--seeds", "1", "--out", dir}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, f := range []string{"runs.jsonl", "study.md", "report.md", "curves.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want a file", f, err)
		}
	}
	done, err := experiment.ReadRecords(filepath.Join(dir, "runs.jsonl"), flagsPattern)
	if err != nil {
		t.Fatal(err)
	}
	// 6 arms under cosine decay, 4 under linear and 4 under step; two
	// tuning runs and one final run each.
	if len(done) != 14*3 {
		t.Fatalf("%d runs, want %d", len(done), 14*3)
	}
	syncs := map[string]int64{}
	for id, r := range done {
		val := argValue(r.Args, "--val-images")
		if strings.HasPrefix(id, "tune/") {
			if val != "512" || r.ValImages != 512 {
				t.Errorf("%s: --val-images %q, record %d; want 512", id, val, r.ValImages)
			}
			continue
		}
		if val != "" || r.ValImages != 0 {
			t.Errorf("%s: --val-images %q, record %d; want none", id, val, r.ValImages)
		}
		best, bestAcc := "", -1.0
		for _, lr := range []string{"0.05", "0.2"} {
			tune := done["tune/"+r.Strategy+"/lr"+lr]
			if tune.TestAcc > bestAcc {
				best, bestAcc = lr, tune.TestAcc
			}
		}
		if got := argValue(r.Args, "--lr"); got != best {
			t.Errorf("%s trains at lr %s, want %s (validation accuracy %.4f)", id, got, best, bestAcc)
		}
		syncs[r.Strategy] = r.Comm.Syncs
	}
	for _, decay := range []string{"cosine", "linear", "step"} {
		for _, arm := range []string{"h-match", "power1"} {
			n, ok := syncs[arm+"-"+decay]
			if !ok {
				continue
			}
			if q := syncs["qsr-"+decay]; n < q-1 || n > q+1 {
				t.Errorf("%s-%s: %d synchronizations, QSR %d: want as many, within one", arm, decay, n, q)
			}
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "study.md"))
	if !strings.Contains(string(md), "| Local SGD, QSR, cosine − Data parallel, cosine |") {
		t.Errorf("study.md lacks the comparison of QSR with data parallel:\n%s", md)
	}

	before, _ := os.ReadFile(filepath.Join(dir, "runs.jsonl"))
	stdout.Reset()
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Errorf("second start: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "runs.jsonl")); !bytes.Equal(before, after) {
		t.Errorf("second start trained again: runs.jsonl grew from %d to %d bytes", len(before), len(after))
	}
}

// TestStudyDryRun lists each study's tuning runs: every arm at every
// default rate, holding out the validation images.
func TestStudyDryRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		arms  int
		rates []string
		want  string
	}{
		{"qsr", 14, []string{"0.05", "0.1", "0.2"}, "tune/power1-cosine/lr0.1"},
		{"decentralized", 4, []string{"0.05", "0.1", "0.2"}, "--lr 0.2 --strategy dmsgd --topology one-peer-exp"},
		{"jointspar", 3, []string{"16", "32", "64"}, "--lr 32 --strategy jointspar --budget 0.5 --balanced-draws --optimizer lars --lars-adapt-all"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"experiment", c.name, "--dry-run", "--out", t.TempDir()}, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: exit %d\n%s", c.name, code, stderr.String())
		}
		out := stdout.String()
		tune := strings.Count(out, "  tune/")
		if tune != c.arms*len(c.rates) || !strings.Contains(out, c.want) || strings.Count(out, "--val-images 5000") != tune {
			t.Errorf("%s: %d tuning runs (want %d), %q in them: %v\n%s", c.name, tune, c.arms*len(c.rates), c.want, strings.Contains(out, c.want), out)
		}
		for _, r := range c.rates {
			if !strings.Contains(out, "/lr"+r+" ") {
				t.Errorf("%s: no tuning run at rate %s", c.name, r)
			}
		}
	}
}
