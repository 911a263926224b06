package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/flockml/flock/backend/cuda"
)

func init() {
	extraCommands = append(extraCommands, command{"doctor", "report the GPUs, CUDA driver and libraries found", runDoctor, doctorHelp})
}

func doctorHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: flock doctor [--json]

Reports what flock finds for GPU work: the CUDA driver (libcuda.so.1) and
its version, each GPU, and the optional libraries (cuBLAS, NVRTC, cuDNN,
NCCL) with their paths and versions, or why each is missing. Libraries are
searched for in $FLOCK_CUDA_LIB_DIR, by the dynamic loader, in
/usr/local/cuda/lib64 and the system library directories, and in the
nvidia/*/lib folders of an installed PyTorch.

A machine without a GPU is not an error: the report says so and the exit
status is 0.

Flags:
  --json   print the report as one JSON object
`)
}

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			doctorHelp(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "flock doctor: %v; run 'flock doctor --help' for usage\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flock doctor: unexpected argument %q; run 'flock doctor --help' for usage\n", fs.Arg(0))
		return exitUsage
	}
	r := cuda.Probe()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "flock doctor: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	writeDoctor(stdout, r)
	return exitOK
}

func writeDoctor(w io.Writer, r cuda.Report) {
	if r.Driver.Path == "" {
		fmt.Fprintln(w, "CUDA driver: no CUDA driver found")
		if tried := triedList(r.Driver.Error); len(tried) > 0 {
			fmt.Fprintln(w, "  searched:")
			for _, t := range tried {
				fmt.Fprintf(w, "    %s\n", t)
			}
		}
		fmt.Fprintf(w, "  set %s to the directory of libcuda.so.1 if it is installed elsewhere\n", cuda.LibDirEnv)
	} else {
		fmt.Fprintf(w, "CUDA driver: %s (%s)\n", r.Driver.Path, orUnknown(r.Driver.Version))
	}
	switch {
	case len(r.Devices) > 0:
		fmt.Fprintf(w, "GPUs: %d\n", len(r.Devices))
		for _, d := range r.Devices {
			fmt.Fprintf(w, "  %v, %.0f GB/s peak memory bandwidth\n", d, d.PeakBandwidthGBps)
		}
	case r.Driver.Path != "":
		fmt.Fprintf(w, "GPUs: none usable: %s\n", r.Error)
	default:
		fmt.Fprintln(w, "GPUs: none (flock runs on the CPU)")
	}
	fmt.Fprintln(w, "Libraries:")
	for _, l := range r.Libraries {
		if l.Path != "" {
			fmt.Fprintf(w, "  %-7s %s (%s)\n", l.Name, l.Path, orUnknown(l.Version))
			continue
		}
		fmt.Fprintf(w, "  %-7s missing\n", l.Name)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}

// triedList extracts the candidates of a "... (tried a, b, c)" search error.
func triedList(msg string) []string {
	i := strings.Index(msg, "(tried ")
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return nil
	}
	return strings.Split(msg[i+len("(tried "):len(msg)-1], ", ")
}
