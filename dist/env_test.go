package dist

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const envTestToken = "0123456789abcdef0123"

func TestEnvFrom(t *testing.T) {
	t.Parallel()
	tok := []byte(envTestToken)
	cases := []struct {
		name string
		vars map[string]string
		want Env
		err  string
	}{
		{"no launcher", map[string]string{}, Env{Size: 1, LocalSize: 1, MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort}, ""},
		{"torchrun", map[string]string{
			"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
			"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "1234", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{5, 8, 1, 4, "10.0.0.7", 1234, tok, 0}, ""},
		{"torchrun's agent store holds MASTER_PORT", map[string]string{
			"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "29400", "TORCHELASTIC_USE_AGENT_STORE": "True", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{1, 2, 1, 2, "127.0.0.1", 29401, tok, 0}, ""},
		{"torchrun single node defaults", map[string]string{
			"RANK": "2", "WORLD_SIZE": "3", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{2, 3, 2, 3, "127.0.0.1", DefaultMasterPort, tok, 0}, ""},
		{"torchrun one rank needs no token", map[string]string{"RANK": "0", "WORLD_SIZE": "1"},
			Env{0, 1, 0, 1, "127.0.0.1", DefaultMasterPort, nil, 0}, ""},
		{"torchrun beats SLURM", map[string]string{
			"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "9", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{1, 2, 1, 2, "127.0.0.1", DefaultMasterPort, tok, 0}, ""},
		{"Open MPI", map[string]string{
			"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "head", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{3, 4, 1, 2, "head", DefaultMasterPort, tok, 0}, ""},
		{"Open MPI beats SLURM", map[string]string{
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
			"FLOCK_JOB_TOKEN": envTestToken,
		}, Env{0, 2, 0, 2, "127.0.0.1", DefaultMasterPort, tok, 0}, ""},
		{"Open MPI multi-node without master", map[string]string{
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{}, "MASTER_ADDR is not set"},
		{"SLURM", map[string]string{
			"SLURM_PROCID": "6", "SLURM_NTASKS": "7", "SLURM_LOCALID": "0", "SLURM_NODEID": "3",
			"SLURM_TASKS_PER_NODE": "2(x3),1", "SLURM_JOB_NODELIST": "gpu[007-010],cpu1", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{6, 7, 0, 1, "gpu007", DefaultMasterPort, tok, 0}, ""},
		{"SLURM master port and addr override", map[string]string{
			"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "0",
			"SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_JOB_NODELIST": "n[1-2]", "MASTER_PORT": "4000",
			"MASTER_ADDR": "login", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{1, 4, 1, 2, "login", 4000, tok, 0}, ""},
		{"SLURM node list fallback", map[string]string{
			"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_TASKS_PER_NODE": "1(x2)",
			"SLURM_NODELIST": "a,b", "FLOCK_JOB_TOKEN": envTestToken,
		}, Env{0, 2, 0, 1, "a", DefaultMasterPort, tok, 0}, ""},
		{"timeout", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "FLOCK_JOB_TOKEN": envTestToken, "FLOCK_TIMEOUT": "90s"},
			Env{1, 2, 1, 2, "127.0.0.1", DefaultMasterPort, tok, 90 * time.Second}, ""},
		{"timeout in seconds", map[string]string{"RANK": "0", "WORLD_SIZE": "1", "FLOCK_TIMEOUT": "2.5"},
			Env{0, 1, 0, 1, "127.0.0.1", DefaultMasterPort, nil, 2500 * time.Millisecond}, ""},
		{"bad timeout", map[string]string{"RANK": "0", "WORLD_SIZE": "1", "FLOCK_TIMEOUT": "soon"}, Env{}, `FLOCK_TIMEOUT="soon" is not a duration`},
		{"zero timeout", map[string]string{"RANK": "0", "WORLD_SIZE": "1", "FLOCK_TIMEOUT": "0s"}, Env{}, `FLOCK_TIMEOUT="0s": want > 0`},
		{"missing token", map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, Env{}, "FLOCK_JOB_TOKEN is not set"},
		{"short token", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "FLOCK_JOB_TOKEN": "short"}, Env{}, "at least 16"},
		{"missing world size", map[string]string{"RANK": "0"}, Env{}, "WORLD_SIZE is not set"},
		{"bad rank", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, Env{}, `RANK="x" is not an integer`},
		{"rank out of range", map[string]string{"RANK": "2", "WORLD_SIZE": "2", "FLOCK_JOB_TOKEN": envTestToken}, Env{}, "rank 2 outside [0, 2)"},
		{"local rank out of range", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "1", "FLOCK_JOB_TOKEN": envTestToken}, Env{}, "local rank 1 outside [0, 1)"},
		{"bad port", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000", "FLOCK_JOB_TOKEN": envTestToken}, Env{}, "port 70000"},
		{"bad tasks per node", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "2(3)"}, Env{}, "SLURM_TASKS_PER_NODE"},
		{"bad node list", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n[1-"}, Env{}, "unbalanced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envFrom(func(k string) (string, bool) { v, ok := tc.vars[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Rank != tc.want.Rank || got.Size != tc.want.Size || got.LocalRank != tc.want.LocalRank ||
				got.LocalSize != tc.want.LocalSize || got.MasterAddr != tc.want.MasterAddr ||
				got.MasterPort != tc.want.MasterPort || string(got.Token) != string(tc.want.Token) || got.Timeout != tc.want.Timeout {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEnvFromOS(t *testing.T) {
	for _, k := range []string{"WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "MASTER_ADDR", "MASTER_PORT"} {
		t.Setenv(k, "")
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "3")
	t.Setenv("FLOCK_JOB_TOKEN", envTestToken)
	e, err := EnvFromOS()
	if err != nil || e.Rank != 1 || e.Size != 3 || string(e.Token) != envTestToken {
		t.Fatalf("EnvFromOS = %+v, %v", e, err)
	}
}

func TestSlurmNodeList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		list string
		want []string
		err  bool
	}{
		{"node01", []string{"node01"}, false},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}, false},
		{"a[9-11],b,c[3]", []string{"a9", "a10", "a11", "b", "c3"}, false},
		{"r[1-2]n[08-10]", []string{"r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"}, false},
		{"gpu-[1,3]-ib", []string{"gpu-1-ib", "gpu-3-ib"}, false},
		{"x[3,1-2]", []string{"x3", "x1", "x2"}, false},
		{"n[1-", nil, true},
		{"n1]", nil, true},
		{"n[[1]]", nil, true},
		{"n[]", nil, true},
		{"n[4-2]", nil, true},
		{"n[a-b]", nil, true},
		{"", nil, true},
	}
	for _, tc := range cases {
		got, err := slurmExpand(tc.list, 0)
		if tc.err {
			if _, ferr := SlurmFirstHost(tc.list); ferr == nil || (err == nil && len(got) > 0) {
				t.Fatalf("%q: expanded to %v, want an error", tc.list, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("slurmExpand(%q) = %v, %v; want %v", tc.list, got, err, tc.want)
		}
		first, err := SlurmFirstHost(tc.list)
		if err != nil || first != tc.want[0] {
			t.Fatalf("SlurmFirstHost(%q) = %q, %v; want %q", tc.list, first, err, tc.want[0])
		}
	}
	big, err := SlurmFirstHost("n[0-65536]m[0-65536]")
	if err != nil || big != "n0m0" {
		t.Fatalf("SlurmFirstHost of a huge product = %q, %v", big, err)
	}
}

func TestSlurmLocalSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		perNode, nodeID string
		want            int
		err             bool
	}{
		{"", "", 5, false},
		{"4", "0", 4, false},
		{"2(x3),1", "0", 2, false},
		{"2(x3),1", "2", 2, false},
		{"2(x3),1", "3", 1, false},
		{"2(x3),1", "4", 0, true},
		{"3,1(x2)", "2", 1, false},
		{"2(x0)", "0", 0, true},
		{"2(x", "0", 0, true},
		{"2", "-1", 0, true},
	}
	for _, tc := range cases {
		got, err := slurmLocalSize(tc.perNode, tc.nodeID, 5)
		if (err != nil) != tc.err || got != tc.want {
			t.Fatalf("slurmLocalSize(%q, %q) = %d, %v; want %d (error %v)", tc.perNode, tc.nodeID, got, err, tc.want, tc.err)
		}
	}
}
