package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/flockml/flock/backend/cuda"
)

func TestDoctor(t *testing.T) {
	if ok, _ := cuda.Available(); ok {
		runCLICases(t, []cliCase{
			{name: "gpu", args: []string{"doctor"}, stdout: []string{"CUDA driver: ", "GPUs: ", "cuBLAS", "NCCL"}},
		})
	} else {
		// Without a driver doctor says so, lists where it looked, and
		// succeeds.
		runCLICases(t, []cliCase{
			{name: "no driver", args: []string{"doctor"}, stdout: []string{
				"no CUDA driver found", "searched:", "libcuda.so.1", "/usr/local/cuda/lib64/", "GPUs: none", "cuBLAS  missing", "NCCL    missing"}},
		})
	}
	runCLICases(t, []cliCase{
		{name: "help", args: []string{"doctor", "--help"}, stdout: []string{"Usage: flock doctor", "FLOCK_CUDA_LIB_DIR"}},
		{name: "help command", args: []string{"help", "doctor"}, stdout: []string{"Usage: flock doctor"}},
		{name: "bad flag", args: []string{"doctor", "--gpu"}, code: exitUsage, stderr: []string{"flag provided but not defined"}},
		{name: "extra argument", args: []string{"doctor", "now"}, code: exitUsage, stderr: []string{`unexpected argument "now"`}},
		{name: "listed", args: []string{"--help"}, stdout: []string{"doctor"}},
	})
}

func TestDoctorJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"doctor", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r cuda.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if r.Driver.Name != "CUDA driver" || len(r.Libraries) != 4 {
		t.Errorf("report %+v", r)
	}
	if ok, _ := cuda.Available(); !ok && (r.Error == "" || len(r.Devices) != 0) {
		t.Errorf("no GPU here, yet error %q and %d devices", r.Error, len(r.Devices))
	}
}

func TestTriedList(t *testing.T) {
	got := triedList("no CUDA driver found (tried libcuda.so.1: nope, /usr/lib64/)")
	if len(got) != 2 || got[0] != "libcuda.so.1: nope" || got[1] != "/usr/lib64/" {
		t.Errorf("triedList = %q", got)
	}
	if triedList("other") != nil {
		t.Errorf("triedList of a message without a list")
	}
}
