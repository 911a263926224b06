package dist

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env says where this process sits in a job: its rank among Size ranks,
// its rank among the LocalSize ranks on its host, where rank 0 serves the
// rendezvous store, and the job secret.
type Env struct {
	Rank, Size           int
	LocalRank, LocalSize int
	MasterAddr           string
	MasterPort           int
	Token                []byte
	// Timeout, from FLOCK_TIMEOUT (0 when unset), bounds the rendezvous
	// and a silent peer when InitOptions does not say.
	Timeout time.Duration
}

// TimeoutEnv is the environment variable holding the job's timeout: a
// duration such as 90s or 10m, or a number of seconds.
const TimeoutEnv = "FLOCK_TIMEOUT"

// parseTimeout reads a TimeoutEnv value.
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseFloat(v, 64)
		if nerr != nil || math.IsNaN(n) || n > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("dist: env: %s=%q is not a duration such as 90s or 10m", TimeoutEnv, v)
		}
		d = time.Duration(n * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("dist: env: %s=%q: want > 0", TimeoutEnv, v)
	}
	return d, nil
}

// DefaultMasterPort is the store port when no launcher names one (the
// same default as torchrun's).
const DefaultMasterPort = 29500

// MinTokenLen is the shortest FLOCK_JOB_TOKEN accepted for a multi-rank
// job.
const MinTokenLen = 16

// EnvFromOS reads the job layout from the environment variables of the
// launcher that started this process, trying in order:
//
//   - torchrun and flock run: RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//   - Open MPI (mpirun): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//     OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE;
//   - SLURM (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the
//     per-node task counts of SLURM_TASKS_PER_NODE, and the first host of
//     SLURM_JOB_NODELIST as the master.
//
// MASTER_ADDR and MASTER_PORT override what a launcher implies; the port
// defaults to DefaultMasterPort (under a torchrun whose agent serves its own
// store on MASTER_PORT, as TORCHELASTIC_USE_AGENT_STORE says, the port after
// it), and the address to 127.0.0.1 when every
// rank is on one host. With no launcher variables the job is one rank.
// The token is FLOCK_JOB_TOKEN, required (at least MinTokenLen bytes) when
// Size > 1.
func EnvFromOS() (Env, error) {
	return envFrom(os.LookupEnv)
}

func envFrom(lookup func(string) (string, bool)) (Env, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	has := func(k string) bool { _, ok := lookup(k); return ok }
	var (
		e      Env
		err    error
		source string
		master string
	)
	intVar := func(k string, dst *int) {
		if err != nil {
			return
		}
		v := get(k)
		if v == "" {
			err = fmt.Errorf("dist: env: %s is not set", k)
			return
		}
		n, perr := strconv.Atoi(v)
		if perr != nil {
			err = fmt.Errorf("dist: env: %s=%q is not an integer", k, v)
			return
		}
		*dst = n
	}
	optIntVar := func(k string, dst *int, def int) {
		if has(k) && get(k) != "" {
			intVar(k, dst)
		} else {
			*dst = def
		}
	}
	switch {
	case has("RANK") || has("WORLD_SIZE"):
		source = "torchrun"
		intVar("RANK", &e.Rank)
		intVar("WORLD_SIZE", &e.Size)
		optIntVar("LOCAL_RANK", &e.LocalRank, e.Rank)
		optIntVar("LOCAL_WORLD_SIZE", &e.LocalSize, e.Size)
	case has("OMPI_COMM_WORLD_RANK"):
		source = "Open MPI"
		intVar("OMPI_COMM_WORLD_RANK", &e.Rank)
		intVar("OMPI_COMM_WORLD_SIZE", &e.Size)
		optIntVar("OMPI_COMM_WORLD_LOCAL_RANK", &e.LocalRank, e.Rank)
		optIntVar("OMPI_COMM_WORLD_LOCAL_SIZE", &e.LocalSize, e.Size)
	case has("SLURM_PROCID"):
		source = "SLURM"
		intVar("SLURM_PROCID", &e.Rank)
		optIntVar("SLURM_NTASKS", &e.Size, 1)
		optIntVar("SLURM_LOCALID", &e.LocalRank, e.Rank)
		if err == nil {
			e.LocalSize, err = slurmLocalSize(get("SLURM_TASKS_PER_NODE"), get("SLURM_NODEID"), e.Size)
		}
		if err == nil {
			nodes := get("SLURM_JOB_NODELIST")
			if nodes == "" {
				nodes = get("SLURM_NODELIST")
			}
			if nodes != "" {
				master, err = SlurmFirstHost(nodes)
			}
		}
	default:
		e.Size, e.LocalSize = 1, 1
	}
	if err != nil {
		return Env{}, err
	}
	if a := get("MASTER_ADDR"); a != "" {
		master = a
	}
	if master == "" && e.LocalSize == e.Size {
		master = "127.0.0.1"
	}
	e.MasterAddr = master
	optIntVar("MASTER_PORT", &e.MasterPort, DefaultMasterPort)
	if source == "torchrun" && e.MasterPort < 65535 {
		// torchrun's agent may serve its own store on MASTER_PORT, for
		// workers that use it (TORCHELASTIC_USE_AGENT_STORE): flock's
		// rendezvous takes the next port, the same on every rank.
		switch strings.ToLower(get("TORCHELASTIC_USE_AGENT_STORE")) {
		case "true", "1":
			e.MasterPort++
		}
	}
	if err != nil {
		return Env{}, err
	}
	if tok := get("FLOCK_JOB_TOKEN"); tok != "" {
		e.Token = []byte(tok)
	}
	if v := get(TimeoutEnv); v != "" {
		if e.Timeout, err = parseTimeout(v); err != nil {
			return Env{}, err
		}
	}
	if err := e.Validate(); err != nil {
		if source != "" {
			return Env{}, fmt.Errorf("%w (variables of %s)", err, source)
		}
		return Env{}, err
	}
	return e, nil
}

// Validate checks that the ranks are in range, that a multi-rank job names
// its master and port, and that it has a token of at least MinTokenLen
// bytes.
func (e Env) Validate() error {
	switch {
	case e.Size < 1:
		return fmt.Errorf("dist: env: world size %d < 1", e.Size)
	case e.Rank < 0 || e.Rank >= e.Size:
		return fmt.Errorf("dist: env: rank %d outside [0, %d)", e.Rank, e.Size)
	case e.LocalSize < 1 || e.LocalSize > e.Size:
		return fmt.Errorf("dist: env: local world size %d outside [1, %d]", e.LocalSize, e.Size)
	case e.LocalRank < 0 || e.LocalRank >= e.LocalSize:
		return fmt.Errorf("dist: env: local rank %d outside [0, %d)", e.LocalRank, e.LocalSize)
	}
	if e.Size == 1 {
		return nil
	}
	switch {
	case e.MasterAddr == "":
		return errors.New("dist: env: MASTER_ADDR is not set and the ranks span several hosts")
	case e.MasterPort < 1 || e.MasterPort > 65535:
		return fmt.Errorf("dist: env: master port %d outside [1, 65535]", e.MasterPort)
	case len(e.Token) == 0:
		return errors.New("dist: env: FLOCK_JOB_TOKEN is not set; a multi-rank job needs a shared secret (flock run generates one for a single node; for several nodes set the same value on all of them, e.g. FLOCK_JOB_TOKEN=$(openssl rand -hex 32))")
	case len(e.Token) < MinTokenLen:
		return fmt.Errorf("dist: env: FLOCK_JOB_TOKEN has %d bytes, want at least %d", len(e.Token), MinTokenLen)
	}
	return nil
}

// slurmLocalSize returns the number of tasks on node nodeID given
// SLURM_TASKS_PER_NODE ("2(x3),1": two tasks on each of three nodes, then
// one). Without that variable it assumes the tasks spread evenly.
func slurmLocalSize(perNode, nodeID string, size int) (int, error) {
	if perNode == "" {
		return size, nil
	}
	id := 0
	if nodeID != "" {
		var err error
		if id, err = strconv.Atoi(nodeID); err != nil || id < 0 {
			return 0, fmt.Errorf("dist: env: SLURM_NODEID=%q is not a node index", nodeID)
		}
	}
	bad := func() (int, error) {
		return 0, fmt.Errorf("dist: env: cannot parse SLURM_TASKS_PER_NODE=%q", perNode)
	}
	node := 0
	for part := range strings.SplitSeq(perNode, ",") {
		count, reps := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return bad()
			}
			count, reps = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil || c < 0 || r < 1 {
			return bad()
		}
		if id < node+r {
			return c, nil
		}
		node += r
	}
	return 0, fmt.Errorf("dist: env: SLURM_NODEID %d beyond the %d nodes of SLURM_TASKS_PER_NODE=%q", id, node, perNode)
}

// SlurmFirstHost returns the first host of a SLURM node list such as
// "node[01-04,07],gpu3" (→ "node01"), keeping zero padding.
func SlurmFirstHost(list string) (string, error) {
	hosts, err := slurmExpand(list, 1)
	if err != nil {
		return "", err
	}
	if len(hosts) == 0 {
		return "", fmt.Errorf("dist: env: empty SLURM node list %q", list)
	}
	return hosts[0], nil
}

// slurmExpand expands a SLURM node list into at most limit host names
// (limit ≤ 0: all). Each comma-separated entry outside brackets is a host
// pattern whose bracket groups hold comma-separated numbers or ranges
// lo-hi; a pattern with several groups expands to their cartesian product
// in order.
func slurmExpand(list string, limit int) ([]string, error) {
	bad := func(why string) ([]string, error) {
		return nil, fmt.Errorf("dist: env: SLURM node list %q: %s", list, why)
	}
	var out []string
	full := func() bool { return limit > 0 && len(out) >= limit }
	depth, start := 0, 0
	var entries []string
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '[':
			if depth++; depth > 1 {
				return bad("nested brackets")
			}
		case ']':
			if depth--; depth < 0 {
				return bad("unbalanced brackets")
			}
		case ',':
			if depth == 0 {
				entries = append(entries, list[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return bad("unbalanced brackets")
	}
	entries = append(entries, list[start:])
	for _, ent := range entries {
		ent = strings.TrimSpace(ent)
		if ent == "" {
			continue
		}
		prefixes := []string{""}
		for ent != "" && !full() {
			i := strings.IndexByte(ent, '[')
			if i < 0 {
				for j := range prefixes {
					prefixes[j] += ent
				}
				break
			}
			j := strings.IndexByte(ent, ']')
			items, err := slurmRange(ent[i+1 : j])
			if err != nil {
				return bad(err.Error())
			}
			var next []string
		product:
			for _, p := range prefixes {
				for _, it := range items {
					if limit > 0 && len(out)+len(next) >= limit {
						break product
					}
					next = append(next, p+ent[:i]+it)
				}
			}
			prefixes, ent = next, ent[j+1:]
		}
		for _, p := range prefixes {
			if full() {
				break
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// slurmRange expands "01-03,7" into ["01" "02" "03" "7"], padding each
// number of a range to the width of its lower bound.
func slurmRange(s string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil || lo == "" {
			return nil, fmt.Errorf("bad range %q", part)
		}
		if !isRange {
			out = append(out, lo)
			continue
		}
		b, err := strconv.ParseUint(hi, 10, 32)
		if err != nil || b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("bad range %q", part)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	return out, nil
}
