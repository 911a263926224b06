package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// swarmArgs trains the CNN with Swarm SGD on 800 images a worker a
// epoch, batch 50, logging every step.
func swarmArgs(extra ...string) []string {
	return append([]string{"train", "--strategy", "swarm", "--local-steps", "2", "--train-images", "3200",
		"--batch-size", "50", "--lr", "0.05", "--log-every", "1", "--eval-every", "0", "--json"}, extra...)
}

// TestSwarmTrain trains with Swarm SGD in-process, blocking, non-blocking,
// quantized and sequential, and checks the summaries; checkpoints are
// refused.
func TestSwarmTrain(t *testing.T) {
	needData(t)
	for _, extra := range [][]string{
		{"--workers", "4", "--topology", "ring"},
		{"--workers", "4", "--non-blocking", "--quant-bits", "8"},
		{"--workers", "3", "--sequential", "--geometric"},
	} {
		var stdout, stderr bytes.Buffer
		args := swarmArgs(append([]string{"--epochs", "1", "--model", "mlp"}, extra...)...)
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		var sum struct {
			Kind  string
			Steps int
			Comm  struct {
				Syncs int   `json:"syncs"`
				Sent  int64 `json:"bytes_sent"`
				DP    int64 `json:"dp_bytes"`
			}
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Kind != "summary" || sum.Steps == 0 || sum.Comm.Syncs == 0 || sum.Comm.Sent == 0 || sum.Comm.Sent >= sum.Comm.DP {
			t.Errorf("%v: summary %s", extra, lines[len(lines)-1])
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(swarmArgs("--workers", "2", "--checkpoint", t.TempDir()+"/c"), &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "swarm runs have no checkpoints") {
		t.Errorf("swarm with --checkpoint: exit %d, stderr %q", code, stderr.String())
	}
}

// TestSwarmSurvivesLostProcess starts 4 Swarm processes, kills rank 3
// once rank 0 has taken a few steps, and checks that the other three
// finish training, each reporting the partner it lost.
func TestSwarmSurvivesLostProcess(t *testing.T) {
	needData(t)
	bin := flockBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const k = 4
	cmds := make([]*exec.Cmd, k)
	stderrs := make([]*bytes.Buffer, k)
	var stdout0 *bufio.Scanner
	for r := range k {
		cmd := exec.Command(bin, swarmArgs("--epochs", "8", "--partner-timeout", "20s", "--threads", "1")...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", k),
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "FLOCK_JOB_TOKEN=swarm-fault-test-token-0123456789")
		stderrs[r] = new(bytes.Buffer)
		cmd.Stderr = stderrs[r]
		if r == 0 {
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout0 = bufio.NewScanner(out)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	}()
	// Kill rank 3 when rank 0 reports step 10 of the 128.
	killed := false
	for stdout0.Scan() {
		var rec struct {
			Kind string
			Step int
		}
		if json.Unmarshal(stdout0.Bytes(), &rec) == nil && rec.Kind == "train" && rec.Step >= 10 && !killed {
			if err := cmds[3].Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatalf("rank 0 never reached step 10; stderr:\n%s", stderrs[0])
	}
	cmds[3].Wait()
	var wg sync.WaitGroup
	errs := make([]error, k-1)
	for r := range k - 1 {
		wg.Go(func() {
			done := make(chan error, 1)
			go func() { done <- cmds[r].Wait() }()
			select {
			case errs[r] = <-done:
			case <-time.After(2 * time.Minute):
				errs[r] = fmt.Errorf("still running after 2 minutes")
			}
		})
	}
	wg.Wait()
	for r := range k - 1 {
		if errs[r] != nil {
			t.Errorf("rank %d: %v\n%s", r, errs[r], stderrs[r])
			continue
		}
		if s := stderrs[r].String(); !strings.Contains(s, "partner lost") || !strings.Contains(s, "partner=3") {
			t.Errorf("rank %d does not report losing rank 3:\n%s", r, s)
		}
	}
}
