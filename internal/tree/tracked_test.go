package tree

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
)

// gitFiles lists the files git tracks, or skips the test outside a checkout.
func gitFiles(t *testing.T) []string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	out, err := exec.Command(git, "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	var files []string
	for _, f := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		files = append(files, string(f))
	}
	return files
}

// TestNoBuildOutputTracked checks that git tracks no compiled program and
// ignores the binaries go build writes for each command, in the module's
// root and in the command's directory.
func TestNoBuildOutputTracked(t *testing.T) {
	t.Parallel()
	files := gitFiles(t)
	for _, f := range files {
		r, err := os.Open(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the working tree
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(r, head)
		r.Close()
		head = head[:n]
		for _, magic := range [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {'M', 'Z'}} {
			if bytes.HasPrefix(head, magic) {
				t.Errorf("git tracks %s, a compiled program or object file", f)
			}
		}
	}
	var outputs []string
	for dir, p := range packages(t) {
		if p.Name == "main" {
			base := path.Base(dir)
			outputs = append(outputs, base, dir+"/"+base)
		}
	}
	if len(outputs) == 0 {
		t.Fatal("no commands found")
	}
	outputs = append(outputs, "tree.test", "cpu.prof")
	for _, o := range outputs {
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", o).Run(); err != nil {
			t.Errorf("%s, written by go build or go test, is not ignored by .gitignore", o)
		}
	}
}
