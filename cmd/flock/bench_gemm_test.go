package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchGemmUsage(t *testing.T) {
	runCLICases(t, []cliCase{
		{"listed", []string{"bench", "--help"}, exitOK, []string{"gemm", "numpy"}, nil, false},
		{"help", []string{"bench", "gemm", "--help"}, exitOK, []string{"Usage: flock bench gemm", "OPENBLAS_NUM_THREADS", "FLOCK_CPU_KERNELS", "-threads COUNTS", "-sizes SIZES"}, nil, false},
		{"bad threads", []string{"bench", "gemm", "--threads", "1,0"}, exitUsage, nil, []string{`threads "0": want ≥ 1`}, false},
		{"bad size", []string{"bench", "gemm", "--sizes", "64,3x4"}, exitUsage, nil, []string{`size "3x4"`, "MxKxN"}, false},
		{"zero size", []string{"bench", "gemm", "--sizes", "0"}, exitUsage, nil, []string{`size "0"`}, false},
		{"unknown peer", []string{"bench", "gemm", "--peer", "mkl"}, exitUsage, nil, []string{`unknown peer "mkl"`}, false},
		{"negative rounds", []string{"bench", "gemm", "--rounds", "-1"}, exitUsage, nil, []string{"rounds -1"}, false},
		{"stray argument", []string{"bench", "gemm", "numpy"}, exitUsage, nil, []string{`unexpected argument "numpy"`}, false},
		{"missing peer script", []string{"bench", "gemm", "--peer", "numpy", "--peer-script", "/nonexistent/x.py"}, exitFailure, nil, []string{"/nonexistent/x.py"}, false},
		{"table", []string{"bench", "gemm", "--sizes", "8,5x7x3", "--threads", "1,2", "--rounds", "1", "--min-time", "1ms"},
			exitOK, []string{"| 8x8x8 | 1 |", "| 5x7x3 | 2 |", "round 1  flock 5x7x3", "Peak"}, nil, false},
	})
}

// fakeNumpy is a stand-in for numpy_gemm.py, run by /bin/sh: one record per
// size it is given, with the thread count it finds in the environment.
const fakeNumpy = `#!/bin/sh
sizes=$2
for s in $(echo "$sizes" | tr , ' '); do
  m=${s%%x*}; rest=${s#*x}; k=${rest%%x*}; n=${rest#*x}
  echo "{\"record\":\"gemm\",\"impl\":\"numpy\",\"m\":$m,\"k\":$k,\"n\":$n,\"threads\":$OPENBLAS_NUM_THREADS,\"calls\":3,\"median_s\":0.001,\"gflops\":1.5,\"version\":\"fake ${OPENBLAS_CORETYPE:-unset}\",\"kernel\":\"none\"}"
done
`

// TestBenchGemm runs a tiny side-by-side benchmark against a fake peer, and
// against numpy when /usr/bin/python3 has it, and checks the records.
func TestBenchGemm(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake_numpy.sh")
	if err := os.WriteFile(fake, []byte(fakeNumpy), 0o755); err != nil {
		t.Fatal(err)
	}
	peers := [][]string{{"/bin/sh", fake}}
	if exec.Command("/usr/bin/python3", "-c", "import numpy").Run() == nil {
		peers = append(peers, []string{"/usr/bin/python3", filepath.Join("..", "..", "bench", "peers", "numpy_gemm.py")})
	}
	t.Setenv("OPENBLAS_CORETYPE", "Haswell")
	for _, peer := range peers {
		t.Run(filepath.Base(peer[1]), func(t *testing.T) {
			out := t.TempDir()
			var stdout, stderr bytes.Buffer
			args := []string{"bench", "gemm", "--sizes", "16,9x5x3", "--threads", "1,2", "--rounds", "2", "--min-time", "1ms",
				"--peer", "numpy", "--python", peer[0], "--peer-script", peer[1], "--json", "--out", out}
			if code := run(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			counts := map[string]int{}
			sc := bufio.NewScanner(&stdout)
			for sc.Scan() {
				var rec struct {
					Record  string         `json:"record"`
					Impl    string         `json:"impl"`
					Threads int            `json:"threads"`
					GFLOPS  float64        `json:"gflops"`
					Version string         `json:"version"`
					Ratio   map[string]any `json:"ratio_flock_numpy"`
				}
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				counts[rec.Record]++
				switch rec.Record {
				case "gemm":
					counts[rec.Impl]++
					if rec.GFLOPS <= 0 || (rec.Threads != 1 && rec.Threads != 2) {
						t.Errorf("record %s: want GFLOP/s > 0 on 1 or 2 threads", sc.Text())
					}
					if strings.Contains(rec.Version, "Haswell") {
						t.Errorf("peer ran with OPENBLAS_CORETYPE set: %s", sc.Text())
					}
				case "summary":
					if rec.Ratio["n"] != float64(2) {
						t.Errorf("summary %s: want a ratio over 2 rounds", sc.Text())
					}
				}
			}
			// 3 rounds (one warm-up) × 2 thread counts × 2 sizes per impl.
			if counts["machine"] != 1 || counts["flock"] != 12 || counts["numpy"] != 12 || counts["summary"] != 4 {
				t.Errorf("record counts %v", counts)
			}
			md, _ := filepath.Glob(filepath.Join(out, "gemm_*.md"))
			js, _ := filepath.Glob(filepath.Join(out, "gemm_*.jsonl"))
			if len(md) != 1 || len(js) != 1 {
				t.Fatalf("--out wrote %v and %v", md, js)
			}
			b, err := os.ReadFile(md[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"flock bench gemm --sizes 16,9x5x3", "| 16x16x16 | 2 |", "flock/numpy", "OPENBLAS_NUM_THREADS"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("%s lacks %q:\n%s", md[0], want, b)
				}
			}
		})
	}
}
