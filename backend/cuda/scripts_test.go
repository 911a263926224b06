package cuda

import (
	"os/exec"
	"testing"
)

// TestScriptsParse checks the shell scripts that run on a GPU machine
// (bench/gpu/run.sh, kernels/gen_ptx.sh) with bash -n, and the PyTorch peer
// with Python's parser, so that a typo is found before a GPU is at hand.
func TestScriptsParse(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"../../bench/gpu/run.sh", "kernels/gen_ptx.sh"} {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	const parse = "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
	if out, err := exec.Command(py, "-c", parse, "../../bench/gpu/torch_step.py").CombinedOutput(); err != nil {
		t.Errorf("parse torch_step.py: %v\n%s", err, out)
	}
}
