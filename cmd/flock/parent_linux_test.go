package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunKilled kills flock run with SIGKILL, which it cannot forward, and
// checks that its rank exits promptly anyway, on its parent-death signal.
func TestRunKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flock; skipped in -short mode")
	}
	cmd, sc, stderr := startFlock(t, "run", "--nproc", "1", "--", "sh", "-c", `echo $$; exec sleep 60`)
	if !sc.Scan() {
		t.Fatalf("no output; stderr %q", stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "[0] "))
	if err != nil {
		t.Fatalf("rank's pid: %v", err)
	}
	rank, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer rank.Kill()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); running(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("rank %d still running 5s after flock run was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether process pid exists and is not a zombie waiting
// for a parent to reap it.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command's name in parentheses.
	_, after, _ := bytes.Cut(stat, []byte(") "))
	return len(after) > 0 && after[0] != 'Z'
}
