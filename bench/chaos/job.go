package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// record is what the suite reads of a flock train JSON record of rank 0.
type record struct {
	Kind      string  `json:"kind"`
	Step      int     `json:"step"`
	Loss      float64 `json:"loss"`
	Acc       float64 `json:"acc"`
	Steps     int     `json:"steps"`
	TrainLoss float64 `json:"train_loss"`
	TestLoss  float64 `json:"test_loss"`
	TestAcc   float64 `json:"test_acc"`
	Comm      struct {
		BytesSent int64 `json:"bytes_sent"`
		Syncs     int   `json:"syncs"`
	} `json:"comm"`

	at time.Time // when the suite read it
}

// logLine is a line a job wrote to its standard error, with its time.
type logLine struct {
	at   time.Time
	text string
}

// node is one flock run process of a job and the ranks it started.
type node struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
	err  error         // cmd.Wait's result
}

// job is a running flock job: one flock run process on the loopback
// layout, one per network namespace on the veth layout.
type job struct {
	nodes []*node
	start time.Time

	mu      sync.Mutex
	records []record
	stderr  []logLine
	ranks   map[int]int // rank → pid, as found under the nodes
	changed chan struct{}
}

// exitCode returns a node's exit status (-1 when a signal ended it).
func (n *node) exitCode() int {
	if n.cmd.ProcessState == nil {
		return -1
	}
	return n.cmd.ProcessState.ExitCode()
}

// startJob starts one flock run per element of argvs, each in its own
// process group, reading rank 0's JSON records from standard output and
// every line of standard error.
func startJob(argvs [][]string, env []string) (*job, error) {
	j := &job{start: time.Now(), ranks: map[int]int{}, changed: make(chan struct{}, 1)}
	for _, argv := range argvs {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			j.kill()
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			j.kill()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			j.kill()
			return nil, fmt.Errorf("start %s: %w", argv[0], err)
		}
		n := &node{cmd: cmd, done: make(chan struct{})}
		j.nodes = append(j.nodes, n)
		var readers sync.WaitGroup
		readers.Add(2)
		go func() { defer readers.Done(); j.readRecords(stdout) }()
		go func() { defer readers.Done(); j.readLog(stderr) }()
		go func() {
			readers.Wait()
			n.err = cmd.Wait()
			close(n.done)
			j.notify()
		}()
	}
	return j, nil
}

func (j *job) notify() {
	select {
	case j.changed <- struct{}{}:
	default:
	}
}

func (j *job) readRecords(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, []byte("[0] "))
		if !ok || len(rest) == 0 || rest[0] != '{' {
			continue
		}
		var rec record
		if json.Unmarshal(rest, &rec) != nil {
			continue
		}
		rec.at = time.Now()
		j.mu.Lock()
		j.records = append(j.records, rec)
		j.mu.Unlock()
		j.notify()
	}
}

func (j *job) readLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		j.mu.Lock()
		j.stderr = append(j.stderr, logLine{at: time.Now(), text: sc.Text()})
		j.mu.Unlock()
	}
}

// step returns the last training step rank 0 reported (0 before any).
func (j *job) step() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := len(j.records) - 1; i >= 0; i-- {
		if j.records[i].Kind == "train" {
			return j.records[i].Step
		}
	}
	return 0
}

// lastRecord returns when rank 0's last record came (the start before any).
func (j *job) lastRecord() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.records) == 0 {
		return j.start
	}
	return j.records[len(j.records)-1].at
}

// snapshot returns copies of the records and log lines so far.
func (j *job) snapshot() ([]record, []logLine) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]record(nil), j.records...), append([]logLine(nil), j.stderr...)
}

// ended reports whether every node has exited.
func (j *job) ended() bool {
	for _, n := range j.nodes {
		select {
		case <-n.done:
		default:
			return false
		}
	}
	return true
}

// wait waits until every node has exited or the deadline passes; it
// reports whether they all exited.
func (j *job) wait(deadline time.Time) bool {
	for _, n := range j.nodes {
		select {
		case <-n.done:
		case <-time.After(time.Until(deadline)):
			return false
		}
	}
	return true
}

// exitCodes returns each node's exit status.
func (j *job) exitCodes() []int {
	codes := make([]int, len(j.nodes))
	for i, n := range j.nodes {
		codes[i] = n.exitCode()
	}
	return codes
}

// finished reports whether every node exited with status 0 and rank 0
// wrote its summary record (call once the job has ended).
func (j *job) finished() bool {
	recs, _ := j.snapshot()
	return !slices.ContainsFunc(j.exitCodes(), func(c int) bool { return c != 0 }) && summary(recs) != nil
}

// waitStep waits until rank 0 has reported step s, the job has ended or
// the deadline has passed; it reports whether step s was reached.
func (j *job) waitStep(s int, deadline time.Time) bool {
	for {
		if j.step() >= s {
			return true
		}
		if j.ended() || time.Now().After(deadline) {
			return false
		}
		select {
		case <-j.changed:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL to every node's process group.
func (j *job) kill() {
	for _, n := range j.nodes {
		if n.cmd.Process != nil {
			syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// findRanks records the pids of the ranks the nodes have started (their
// children with RANK in the environment); it waits up to timeout for want
// of them.
func (j *job) findRanks(want int, timeout time.Duration) map[int]int {
	deadline := time.Now().Add(timeout)
	for {
		found := map[int]int{}
		for _, n := range j.nodes {
			for pid, rank := range childRanks(n.cmd.Process.Pid) {
				found[rank] = pid
			}
		}
		if len(found) >= want || time.Now().After(deadline) {
			j.mu.Lock()
			j.ranks = found
			j.mu.Unlock()
			return found
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childRanks returns the children of parent that have RANK in their
// environment, pid → rank, read from /proc.
func childRanks(parent int) map[int]int {
	out := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); !ok || ppid != parent {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("RANK=")); ok {
				if r, err := strconv.Atoi(string(v)); err == nil {
					out[pid] = r
				}
			}
		}
	}
	return out
}

// parentOf returns the parent pid of pid from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}
