package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultGrace is how long the ranks get between SIGTERM (or a forwarded
// signal) and SIGKILL when Config.Grace is 0.
const DefaultGrace = 15 * time.Second

// TokenEnv is the environment variable holding the job's secret.
const TokenEnv = "FLOCK_JOB_TOKEN"

// ErrConfig is wrapped by the errors of Run that come from its Config.
var ErrConfig = errors.New("launch: invalid config")

// Config describes the ranks to start on this node.
type Config struct {
	// NProc is the number of processes started on this node (≥ 1).
	NProc int
	// NNodes is the number of nodes of the job (0 means 1) and NodeRank
	// this node's index in [0, NNodes). The node's ranks are
	// NodeRank·NProc … NodeRank·NProc + NProc − 1.
	NNodes, NodeRank int
	// Master is the HOST:PORT of rank 0's rendezvous store. Required for
	// more than one node; on one node it defaults to 127.0.0.1 and a free
	// port.
	Master string
	// Program is run with Args by every rank; a name without a slash is
	// looked up in PATH.
	Program string
	Args    []string
	// Env is the environment the ranks start from (nil: os.Environ()).
	Env []string
	// Stdout and Stderr receive the ranks' output, every line prefixed
	// with "[rank] " (nil: discarded).
	Stdout, Stderr io.Writer
	// Signals are forwarded to every running rank. The first one also
	// counts as an interruption: ranks still running Grace later are
	// killed.
	Signals <-chan os.Signal
	// Grace is the time between asking the ranks to stop and killing them
	// (0: DefaultGrace).
	Grace time.Duration
	// Logger receives the launcher's events: a rank failing, the ranks
	// being stopped or killed (nil: none).
	Logger *slog.Logger
}

// ExitError reports the first rank that exited with a non-zero status.
type ExitError struct {
	Rank int
	// Code is the rank's exit status, 128 + the signal's number when a
	// signal ended it.
	Code int
	// Signal is the signal that ended the rank, nil when it exited.
	Signal os.Signal
	// Stopped is the number of other ranks that were still running and
	// were stopped.
	Stopped int
	// Killed lists the other ranks that a signal ended which the launcher
	// did not send (SIGKILL from outside, the out-of-memory killer, a
	// crash), in the order their ends were seen. A rank killed from
	// outside is often the cause of its peers' failures, whose exits may
	// be seen first.
	Killed []RankSignal
}

// RankSignal is a rank and the signal that ended it.
type RankSignal struct {
	Rank   int
	Signal os.Signal
}

func (e *ExitError) Error() string {
	how := fmt.Sprintf("exited with status %d", e.Code)
	if e.Signal != nil {
		how = fmt.Sprintf("was killed by signal %v", e.Signal)
	}
	msg := fmt.Sprintf("launch: rank %d %s", e.Rank, how)
	for _, k := range e.Killed {
		msg += fmt.Sprintf("; rank %d was killed by signal %v", k.Rank, k.Signal)
	}
	if e.Stopped == 0 {
		return msg
	}
	return fmt.Sprintf("%s; stopped %d other rank(s)", msg, e.Stopped)
}

// InterruptedError reports that the job was interrupted, by a forwarded
// signal or by the end of Run's context (then Signal is nil and Err is the
// context's error).
type InterruptedError struct {
	Signal os.Signal
	Err    error
}

func (e *InterruptedError) Error() string {
	if e.Signal != nil {
		return fmt.Sprintf("launch: interrupted: forwarded signal %d (%v) to the ranks", signalNumber(e.Signal), e.Signal)
	}
	return fmt.Sprintf("launch: interrupted: %v", e.Err)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// rank is one started process.
type rank struct {
	id       int
	cmd      *exec.Cmd
	out, err *prefixWriter
	running  bool
}

// exit is a rank's end, as seen by Wait.
type exit struct {
	rank   *rank
	code   int
	signal os.Signal
}

// Run starts cfg.NProc processes of cfg.Program, each with the
// environment of a torchrun worker:
//
//	RANK              NodeRank·NProc + LOCAL_RANK
//	WORLD_SIZE        NNodes·NProc
//	LOCAL_RANK        0 … NProc−1
//	LOCAL_WORLD_SIZE  NProc
//	MASTER_ADDR       Master's host
//	MASTER_PORT       Master's port
//	FLOCK_JOB_TOKEN   the job's secret: the environment's, or on one node
//	                  when it has none 32 random bytes in hex
//
// and, when the environment does not set them, GOMAXPROCS and
// OMP_NUM_THREADS to max(1, NumCPU/NProc), so the ranks do not
// oversubscribe the cores.
//
// Run waits for every rank. When one exits with a non-zero status, the
// others still running get SIGTERM and, Grace later, SIGKILL; Run returns
// that status and an *ExitError. When a signal arrives on cfg.Signals or
// ctx ends, the ranks get that signal (SIGTERM for ctx) and likewise
// SIGKILL Grace later; Run returns the first non-zero status of a rank, or
// 128 + the signal's number when all exited with 0, and an
// *InterruptedError. Each rank runs in its own process group, which the
// signals are sent to.
//
// exitCode is the status the launcher should exit with: 0 when every rank
// succeeded, 2 for an invalid Config (err wraps ErrConfig) and 1 when a
// rank could not be started.
func Run(ctx context.Context, cfg Config) (exitCode int, err error) {
	env, err := cfg.environment()
	if err != nil {
		return 2, err
	}
	path, err := exec.LookPath(cfg.Program)
	if err != nil {
		return 1, fmt.Errorf("launch: %w", err)
	}
	grace := cfg.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	stdout, stderr := cfg.Stdout, cfg.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	var outMu sync.Mutex
	nodes := max(cfg.NNodes, 1)
	ranks := make([]*rank, cfg.NProc)
	exits := make(chan exit, cfg.NProc)
	var mu sync.Mutex // guards rank.running
	signalAll := func(sig os.Signal) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range ranks {
			if r != nil && r.running {
				signalGroup(r.cmd.Process, sig)
				n++
			}
		}
		return n
	}

	started := 0
	var startErr error
	for local := range cfg.NProc {
		id := cfg.NodeRank*cfg.NProc + local
		r := &rank{id: id}
		r.out = newPrefixWriter(&outMu, stdout, id)
		r.err = newPrefixWriter(&outMu, stderr, id)
		r.cmd = exec.Command(path, cfg.Args...)
		r.cmd.Env = append(env[:len(env):len(env)],
			"RANK="+strconv.Itoa(id),
			"WORLD_SIZE="+strconv.Itoa(nodes*cfg.NProc),
			"LOCAL_RANK="+strconv.Itoa(local),
			"LOCAL_WORLD_SIZE="+strconv.Itoa(cfg.NProc),
		)
		r.cmd.Stdout, r.cmd.Stderr = r.out, r.err
		r.cmd.WaitDelay = grace
		setProcessGroup(r.cmd)
		mu.Lock()
		err := r.cmd.Start()
		if err == nil {
			r.running = true
			ranks[local] = r
		}
		mu.Unlock()
		if err != nil {
			startErr = fmt.Errorf("launch: rank %d: %w", id, err)
			break
		}
		started++
		go func() {
			r.cmd.Wait()
			mu.Lock()
			r.running = false
			mu.Unlock()
			r.out.Flush()
			r.err.Flush()
			code, sig := exitStatus(r.cmd.ProcessState)
			exits <- exit{r, code, sig}
		}()
	}

	var (
		failed      *ExitError
		interrupted *InterruptedError
		firstCode   int
		kill        <-chan time.Time
		killed      bool // the ranks still running got SIGKILL
		done        = ctx.Done()
		signals     = cfg.Signals
	)
	stop := func(sig os.Signal) {
		if kill == nil {
			kill = time.After(grace)
		}
		signalAll(sig)
	}
	if startErr != nil {
		log.Error("cannot start a rank; stopping the others", "err", startErr, "started", started)
		stop(sigTerm)
	}
	for left := started; left > 0; {
		select {
		case e := <-exits:
			left--
			if e.code == 0 {
				break
			}
			if firstCode == 0 {
				firstCode = e.code
			}
			if failed != nil && e.signal != nil && e.signal != sigTerm && !(e.signal == os.Kill && killed) {
				failed.Killed = append(failed.Killed, RankSignal{e.rank.id, e.signal})
				log.Error("a rank was killed by a signal from outside the launcher", "rank", e.rank.id, "signal", e.signal)
			}
			if failed != nil || interrupted != nil || startErr != nil {
				break
			}
			failed = &ExitError{Rank: e.rank.id, Code: e.code, Signal: e.signal, Stopped: left}
			if left > 0 {
				log.Error("rank failed; stopping the others", "rank", e.rank.id, "status", e.code, "running", left)
				stop(sigTerm)
			}
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				break
			}
			n := signalAll(sig)
			if interrupted == nil && failed == nil {
				interrupted = &InterruptedError{Signal: sig}
			}
			log.Info("forwarded a signal", "signal", sig, "ranks", n)
			if kill == nil {
				kill = time.After(grace)
			}
		case <-done:
			done = nil
			if interrupted == nil && failed == nil {
				interrupted = &InterruptedError{Err: ctx.Err()}
			}
			log.Info("context ended; stopping the ranks", "err", ctx.Err())
			stop(sigTerm)
		case <-kill:
			killed = true
			n := signalAll(os.Kill)
			log.Warn("grace period over; killed the ranks still running", "ranks", n, "grace", grace)
		}
	}

	switch {
	case startErr != nil:
		return 1, startErr
	case failed != nil:
		return failed.Code, failed
	case interrupted != nil:
		if firstCode != 0 {
			return firstCode, interrupted
		}
		return 128 + signalNumber(interrupted.Signal), interrupted
	}
	return 0, nil
}

// environment returns the environment shared by the node's ranks.
func (cfg *Config) environment() ([]string, error) {
	nodes := max(cfg.NNodes, 1)
	switch {
	case cfg.NProc < 1:
		return nil, fmt.Errorf("%w: nproc %d: want ≥ 1", ErrConfig, cfg.NProc)
	case cfg.NNodes < 0:
		return nil, fmt.Errorf("%w: nnodes %d: want ≥ 1", ErrConfig, cfg.NNodes)
	case cfg.NodeRank < 0 || cfg.NodeRank >= nodes:
		return nil, fmt.Errorf("%w: node rank %d: want in [0, %d)", ErrConfig, cfg.NodeRank, nodes)
	case cfg.Program == "":
		return nil, fmt.Errorf("%w: no program", ErrConfig)
	case nodes > 1 && cfg.Master == "":
		return nil, fmt.Errorf("%w: %d nodes need the master's HOST:PORT", ErrConfig, nodes)
	}
	base := cfg.Env
	if base == nil {
		base = os.Environ()
	}
	host, port := "127.0.0.1", 0
	if cfg.Master != "" {
		h, p, err := net.SplitHostPort(cfg.Master)
		if err == nil && h == "" {
			err = errors.New("no host")
		}
		if err == nil {
			port, err = strconv.Atoi(p)
			if err == nil && (port < 1 || port > 65535) {
				err = errors.New("port out of range")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: master %q: want HOST:PORT: %v", ErrConfig, cfg.Master, err)
		}
		host = h
	} else {
		p, err := freePort(host)
		if err != nil {
			return nil, fmt.Errorf("launch: choose the master port: %w", err)
		}
		port = p
	}
	token := lookup(base, TokenEnv)
	if token == "" {
		if nodes > 1 {
			return nil, fmt.Errorf("%w: %d nodes need the same job secret in %s on every node", ErrConfig, nodes, TokenEnv)
		}
		b := make([]byte, 32)
		rand.Read(b)
		token = hex.EncodeToString(b)
	}

	set := map[string]bool{"RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true,
		"MASTER_ADDR": true, "MASTER_PORT": true, TokenEnv: true}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			env = append(env, kv)
		}
	}
	env = append(env, "MASTER_ADDR="+host, "MASTER_PORT="+strconv.Itoa(port), TokenEnv+"="+token)
	threads := strconv.Itoa(max(1, runtime.NumCPU()/cfg.NProc))
	for _, k := range []string{"GOMAXPROCS", "OMP_NUM_THREADS"} {
		if lookup(base, k) == "" {
			env = append(env, k+"="+threads)
		}
	}
	return env, nil
}

// lookup returns the value of key in env, the last one when set twice.
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// freePort returns a TCP port on host that was free a moment ago.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
