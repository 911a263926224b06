package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/launch"
)

// runOptions are the flags of flock run.
type runOptions struct {
	nproc            nprocValue
	nnodes, nodeRank int
	master           string
	grace, timeout   time.Duration
}

// nprocValue is --nproc: a number of processes, or gpu for one per GPU of
// the node (torchrun's --nproc-per-node gpu).
type nprocValue struct {
	n   int
	gpu bool
}

func (v *nprocValue) String() string {
	if v.gpu {
		return "gpu"
	}
	return strconv.Itoa(v.n)
}

func (v *nprocValue) Set(s string) error {
	if s == "gpu" {
		*v = nprocValue{gpu: true}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q: want a number or gpu", s)
	}
	*v = nprocValue{n: n}
	return nil
}

// count returns the processes v asks for; gpus counts the node's GPUs
// (cuda.Available and cuda.DeviceCount in flock run), failing with the
// reason when there are none.
func (v nprocValue) count(gpus func() (int, error)) (int, error) {
	if !v.gpu {
		return v.n, nil
	}
	n, err := gpus()
	if err != nil {
		return 0, fmt.Errorf("--nproc gpu: %w", err)
	}
	if n < 1 {
		return 0, errors.New("--nproc gpu: the CUDA driver sees no GPU")
	}
	return n, nil
}

// nodeGPUs counts the GPUs the CUDA driver sees (CUDA_VISIBLE_DEVICES
// applies), or says why there are none.
func nodeGPUs() (int, error) {
	if ok, err := cuda.Available(); !ok {
		return 0, err
	}
	return cuda.DeviceCount(), nil
}

func runFlags(o *runOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.nproc = nprocValue{n: 1}
	fs.Var(&o.nproc, "nproc", "processes to start on this node, `N`, or gpu: one per GPU the CUDA driver sees (each rank's LOCAL_RANK picks its GPU for --device cuda)")
	fs.IntVar(&o.nnodes, "nnodes", 1, "nodes of the job, each running flock run with the same --nproc")
	fs.IntVar(&o.nodeRank, "node-rank", 0, "this node's index in [0, nnodes)")
	fs.StringVar(&o.master, "master", "", "`HOST:PORT` of rank 0's rendezvous store (required for several nodes; default on one node: 127.0.0.1 and a free port)")
	fs.DurationVar(&o.timeout, "timeout", 0, "the ranks' "+dist.TimeoutEnv+": how long rank 0 waits for the others to join and a silent peer may take before the job fails, a `DURATION` (default: the environment's "+dist.TimeoutEnv+", else "+strings.TrimSuffix(dist.DefaultTimeout.String(), "0s")+")")
	fs.DurationVar(&o.grace, "grace", launch.DefaultGrace, "time between asking the ranks to stop (SIGTERM or a forwarded signal) and SIGKILL, a `DURATION` such as 30s or 2m")
	return fs
}

func launchHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: flock run [flags] [--] PROGRAM [ARGS...]

Start the ranks of a distributed job on this node: --nproc processes of
PROGRAM, each with torchrun's variables set (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), the job's secret in
FLOCK_JOB_TOKEN, and GOMAXPROCS and OMP_NUM_THREADS set to the cores divided
by --nproc unless already set. Rank r of node n is n·nproc + local rank.
--nproc gpu starts one process per GPU of the node (torchrun's
--nproc-per-node gpu), counted through the CUDA driver; flock train
--device cuda then trains each rank on the GPU of its LOCAL_RANK.

On one node the secret is made up when FLOCK_JOB_TOKEN is not set; for
several nodes, set the same FLOCK_JOB_TOKEN on every node (e.g. the output
of 'openssl rand -hex 32') and give every node the same --master.

Every line the ranks write is prefixed with "[rank] ". SIGINT and SIGTERM
are forwarded to the ranks (flock train's ranks then save their checkpoint
and stop), and SIGKILL follows after the grace period. When a rank exits
with a non-zero status, the others get SIGTERM, then SIGKILL after the grace
period, and flock run exits with that rank's status (128+N when signal N
ended it). When flock run itself is killed, its ranks get SIGTERM (Linux,
FreeBSD; elsewhere flock train notices that its parent is gone).

Examples:
  flock run --nproc 4 -- flock train --model cnn
  flock run --nproc gpu -- flock train --device cuda --strategy dp
  flock run --nnodes 2 --node-rank 0 --master node1:29500 --nproc 8 -- flock train

Flags:
`)
	o := runOptions{}
	fs := runFlags(&o)
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		switch name {
		case "int":
			name = "N"
		case "string":
			name = "VALUE"
		}
		head := "--" + f.Name + " " + name
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" || f.Name == "node-rank" {
			use += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %s\n\t%s\n", head, use)
	})
	fmt.Fprint(w, `
Exit status: the failed rank's status, 0 when every rank succeeded, 1 when a
rank could not be started, 2 for a usage error, 128+N when interrupted by
signal N and every rank exited with 0.
`)
}

func runUsageError(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "flock run: "+format+"; run 'flock run --help' for usage\n", a...)
	return exitUsage
}

func runLaunch(args []string, stdout, stderr io.Writer) int {
	o := runOptions{}
	fs := runFlags(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			launchHelp(stdout)
			return exitOK
		}
		return runUsageError(stderr, "%v", err)
	}
	if fs.NArg() == 0 {
		return runUsageError(stderr, "no program to run")
	}
	if o.grace <= 0 {
		return runUsageError(stderr, "grace %v: want > 0", o.grace)
	}
	if o.timeout < 0 {
		return runUsageError(stderr, "timeout %v: want > 0", o.timeout)
	}
	nproc, err := o.nproc.count(nodeGPUs)
	if err != nil {
		return runUsageError(stderr, "%v", err)
	}
	var env []string
	if o.timeout > 0 {
		env = append(os.Environ(), dist.TimeoutEnv+"="+o.timeout.String())
	}
	program := fs.Arg(0)
	if program == "flock" {
		// The flock that runs, when none is installed in PATH.
		if _, err := exec.LookPath(program); err != nil {
			if exe, err := os.Executable(); err == nil {
				program = exe
			}
		}
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	log := commandLogger(stderr, "flock run")
	code, err := launch.Run(context.Background(), launch.Config{
		NProc:    nproc,
		NNodes:   o.nnodes,
		NodeRank: o.nodeRank,
		Master:   o.master,
		Program:  program,
		Args:     fs.Args()[1:],
		Env:      env,
		Stdout:   stdout,
		Stderr:   stderr,
		Signals:  sigs,
		Grace:    o.grace,
		Logger:   log,
	})
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "launch: ")
		if errors.Is(err, launch.ErrConfig) {
			return runUsageError(stderr, "%s", strings.TrimPrefix(msg, "invalid config: "))
		}
		fmt.Fprintf(stderr, "flock run: %s\n", msg)
	}
	return code
}

// commandLogger returns a logger writing text lines to stderr without the
// time, their message prefixed with the command's name.
func commandLogger(stderr io.Writer, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			if a.Key == slog.MessageKey {
				a.Value = slog.StringValue(name + ": " + a.Value.String())
			}
			return a
		},
	}))
}
