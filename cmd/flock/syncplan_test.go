package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSyncPlan checks flock sync-plan against the schedules' test vector
// (its help's example; localopt's TestQSRVector) and its refusal of bad
// settings.
func TestSyncPlan(t *testing.T) {
	args := []string{"sync-plan", "--lr", "0.1", "--warmup-steps", "10", "--warmup-start-lr", "0", "--final-lr", "0", "--steps", "110", "--decay", "cosine", "--sync", "qsr", "--qsr-alpha", "0.2", "--h-base", "2"}
	var stdout, stderr bytes.Buffer
	if code := run(append(args, "--rounds-only"), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := "0:2 2:2 4:2 6:2 8:2 10:4 14:4 18:4 22:4 26:4 30:4 34:5 39:6 45:7 52:10 62:18 80:30\n"
	if stdout.String() != want {
		t.Errorf("rounds %q, want %q", stdout.String(), want)
	}
	stdout.Reset()
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, w := range []string{"QSR α = 0.2, Hbase = 2", "17 synchronizations (data parallel: 110)", "6.5× less"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, stdout.String())
		}
	}
	stdout.Reset()
	if code := run([]string{"sync-plan", "--steps", "12", "--warmup-steps", "0", "--sync", "post-local", "--h", "4", "--post-local-switch-step", "5", "--rounds-only"}, &stdout, &stderr); code != exitOK || stdout.String() != "0:1 1:1 2:1 3:1 4:1 5:4 9:3\n" {
		t.Errorf("post-local: exit %d, %q", code, stdout.String())
	}
	for _, bad := range [][]string{{"--sync", "cubic"}, {"--steps", "0"}, {"--h-base", "0"}, {"--decay", "exp"}, {"--qsr-alpha", "-1"}} {
		stderr.Reset()
		if code := run(append([]string{"sync-plan"}, bad...), &stdout, &stderr); code != exitUsage || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", bad, code, stderr.String())
		}
	}
}
