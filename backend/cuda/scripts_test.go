package cuda

import (
	"os/exec"
	"testing"
)

// TestScriptsParse checks the shell scripts of the GPU check
// (bench/gpu/build.sh and run.sh, kernels/gen_ptx.sh) with bash -n, and its
// Python (the PyTorch peer, the summary) with Python's parser, so that a
// typo is found before a GPU is at hand. .ci/run rehearses run.sh as well.
func TestScriptsParse(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"../../bench/gpu/build.sh", "../../bench/gpu/run.sh", "kernels/gen_ptx.sh"} {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	const parse = "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
	for _, s := range []string{"../../bench/gpu/torch_step.py", "../../bench/gpu/summary.py"} {
		if out, err := exec.Command(py, "-c", parse, s).CombinedOutput(); err != nil {
			t.Errorf("parse %s: %v\n%s", s, err, out)
		}
	}
}
