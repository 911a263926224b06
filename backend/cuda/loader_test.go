package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeTree makes a directory tree with empty files at the given paths
// (relative to root) and returns root.
func fakeTree(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// testSearchEnv searches only inside root: its FLOCK_CUDA_LIB_DIR, a fake
// home with a pyenv Python, and VIRTUAL_ENV; the system directories do not
// exist there.
func testSearchEnv(root string, env map[string]string) searchEnv {
	return searchEnv{
		getenv: func(k string) string { return env[k] },
		glob:   filepath.Glob,
		exists: func(p string) bool {
			if !strings.HasPrefix(p, root) {
				return false
			}
			_, err := os.Stat(p)
			return err == nil
		},
		home: filepath.Join(root, "home"),
	}
}

// recordOpens replaces dlopen for a test, recording the order of attempts
// and succeeding only for paths in ok.
func recordOpens(t *testing.T, ok ...string) *[]string {
	var tried []string
	old := dlopen
	dlopen = func(p string) (uintptr, error) {
		tried = append(tried, p)
		for _, o := range ok {
			if p == o {
				return 42, nil
			}
		}
		return 0, errors.New(p + ": cannot open shared object file")
	}
	t.Cleanup(func() { dlopen = old })
	return &tried
}

func TestLoaderSearchOrder(t *testing.T) {
	root := fakeTree(t,
		"custom/libcublas.so.12",
		"other/libcublas.so.13",
		"home/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13",
		"venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
	)
	env := map[string]string{
		LibDirEnv:     filepath.Join(root, "custom") + ":" + filepath.Join(root, "other"),
		"VIRTUAL_ENV": filepath.Join(root, "venv"),
	}
	e := testSearchEnv(root, env)
	try, absent := e.candidates(CUBLAS)
	venv := filepath.Join(root, "venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13")
	pyenv := filepath.Join(root, "home/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12")
	want := []string{
		// FLOCK_CUDA_LIB_DIR, in the order given, files that exist only.
		filepath.Join(root, "custom/libcublas.so.12"),
		filepath.Join(root, "other/libcublas.so.13"),
		// The dynamic loader's own search, newest soname first.
		"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
		// Python installations: the virtual environment before the home's.
		venv, pyenv,
	}
	if !reflect.DeepEqual(try, want) {
		t.Errorf("candidates:\n got %q\nwant %q", try, want)
	}
	for _, p := range absent {
		if p == venv || p == pyenv {
			t.Errorf("existing %s listed as absent", p)
		}
	}
	if !contains(absent, "/usr/local/cuda/lib64/libcublas.so.12") {
		t.Errorf("absent list lacks /usr/local/cuda/lib64: %q", absent)
	}

	// The first candidate that opens wins, and the attempts before it are
	// made in order.
	tried := recordOpens(t, venv)
	lib, err := e.open(CUBLAS)
	if err != nil {
		t.Fatal(err)
	}
	if lib.Path != venv || lib.Handle != 42 {
		t.Errorf("opened %s (%d)", lib.Path, lib.Handle)
	}
	if !reflect.DeepEqual(*tried, want[:6]) {
		t.Errorf("dlopen order:\n got %q\nwant %q", *tried, want[:6])
	}
	if !reflect.DeepEqual(lib.Tried, want[:6]) {
		t.Errorf("Tried %q", lib.Tried)
	}
}

func TestLoaderEnvDirWins(t *testing.T) {
	root := fakeTree(t, "a/libcudnn.so.9", "venv/lib/python3.10/site-packages/nvidia/cudnn/lib/libcudnn.so.9")
	e := testSearchEnv(root, map[string]string{LibDirEnv: filepath.Join(root, "a"), "VIRTUAL_ENV": filepath.Join(root, "venv")})
	tried := recordOpens(t, filepath.Join(root, "a/libcudnn.so.9"), "libcudnn.so.9")
	lib, err := e.open(CUDNN)
	if err != nil {
		t.Fatal(err)
	}
	if lib.Path != filepath.Join(root, "a/libcudnn.so.9") || len(*tried) != 1 {
		t.Errorf("opened %s after %q", lib.Path, *tried)
	}
}

func TestLoaderNotFound(t *testing.T) {
	root := fakeTree(t)
	e := testSearchEnv(root, map[string]string{})
	tried := recordOpens(t)
	_, err := e.open(Driver)
	if err == nil {
		t.Fatal("no error")
	}
	if !IsNotFound(err) {
		t.Errorf("IsNotFound(%v) = false", err)
	}
	msg := err.Error()
	for _, w := range []string{"no CUDA driver found (tried ", "libcuda.so.1: cannot open shared object file", "/usr/local/cuda/lib64/"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q lacks %q", msg, w)
		}
	}
	if !reflect.DeepEqual(*tried, []string{"libcuda.so.1"}) {
		t.Errorf("dlopen calls %q: only the bare soname exists to try", *tried)
	}
}

func TestLibNames(t *testing.T) {
	t.Parallel()
	for l := Driver; l < numLibs; l++ {
		if l.String() == "" || len(l.Sonames()) == 0 {
			t.Errorf("library %d has no name or sonames", l)
		}
	}
	if Lib(99).String() != "Lib(99)" {
		t.Errorf("unknown library named %q", Lib(99).String())
	}
	if _, err := Open(Lib(99)); err == nil {
		t.Errorf("Open of an unknown library succeeded")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
