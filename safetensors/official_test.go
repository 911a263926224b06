package safetensors_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/flockml/flock/internal/peers"
	"github.com/flockml/flock/safetensors"
)

// TestOfficialPackage exchanges a file of every dtype with the official
// safetensors package in both directions: flock writes, the package's
// parser reads (bench/peers/safetensors_official.py); the package's writer
// writes the same tensors, flock reads, and the bytes equal flock's, as the
// package doc promises. It needs bench/peers/setup.sh's environment and
// skips without it; one Python process that imports numpy, not torch.
func TestOfficialPackage(t *testing.T) {
	t.Parallel()
	python, err := peers.Python(".")
	if err != nil {
		t.Skipf("official safetensors package: %v", err)
	}
	dtypes := []safetensors.DType{safetensors.BOOL, safetensors.U8, safetensors.I8, safetensors.F8E5M2, safetensors.F8E4M3,
		safetensors.I16, safetensors.U16, safetensors.F16, safetensors.BF16, safetensors.I32, safetensors.U32,
		safetensors.F32, safetensors.F64, safetensors.I64, safetensors.U64}
	tensors := map[string]safetensors.Tensor{}
	for k, dt := range dtypes {
		shape := []int{3, 1 + k%4}
		data := make([]byte, 3*(1+k%4)*dt.Size())
		for i := range data {
			data[i] = byte(37*i + 11*k + 1)
			if dt == safetensors.BOOL {
				data[i] &= 1
			}
		}
		tensors["t."+string(dt)] = safetensors.Tensor{DType: dt, Shape: shape, Data: data}
	}
	tensors["scalar"] = safetensors.Tensor{DType: safetensors.F32, Shape: []int{}, Data: []byte{0, 0, 0x20, 0x40}}
	tensors["empty"] = safetensors.Tensor{DType: safetensors.F64, Shape: []int{0, 5}, Data: []byte{}}
	// One key: the official writer keeps metadata in a hash map, so the
	// order of several keys in its header varies from run to run.
	meta := map[string]string{"note": "flock → safetensors\t\"quoted\" \\ \u0001"}

	dir := t.TempDir()
	in, out := filepath.Join(dir, "flock.safetensors"), filepath.Join(dir, "official.safetensors")
	if err := safetensors.WriteFile(in, tensors, meta); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("..", "bench", "peers", "safetensors_official.py")
	cmd := exec.Command(python, script, in, out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}

	// flock → official.
	var got struct {
		Version  string            `json:"version"`
		Metadata map[string]string `json:"metadata"`
		Tensors  map[string]struct {
			DType string `json:"dtype"`
			Shape []int  `json:"shape"`
			Data  string `json:"data"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("%s's output %q: %v", script, stdout, err)
	}
	t.Logf("safetensors %s", got.Version)
	read := &safetensors.File{Tensors: map[string]safetensors.Tensor{}, Metadata: got.Metadata}
	for name, g := range got.Tensors {
		data, err := hex.DecodeString(g.Data)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		read.Tensors[name] = safetensors.Tensor{DType: safetensors.DType(g.DType), Shape: g.Shape, Data: data}
	}
	t.Run("flock to official", func(t *testing.T) { equalFiles(t, read, tensors, meta) })

	// official → flock.
	f, err := safetensors.Open(out)
	if err != nil {
		t.Fatalf("reading the official package's file: %v", err)
	}
	t.Run("official to flock", func(t *testing.T) { equalFiles(t, f, tensors, meta) })
	a, errA := os.ReadFile(in)
	b, errB := os.ReadFile(out)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the official writer's file (%d bytes) differs from flock's (%d bytes) for the same tensors", len(b), len(a))
	}
}
