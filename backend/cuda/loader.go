package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// Lib names one of the shared libraries the package opens at run time.
type Lib int

// The libraries. Only the driver is required; each other one enables a part
// of the backend (matrix products on cuBLAS, kernels compiled by NVRTC,
// convolutions on cuDNN, collectives on NCCL) and is reported by name when it
// is missing.
const (
	Driver Lib = iota // libcuda.so.1, installed with the GPU driver
	CUBLAS            // cuBLAS
	NVRTC             // the run-time CUDA C compiler
	CUDNN             // cuDNN 9
	NCCL              // NCCL 2
	numLibs
)

var libInfo = [numLibs]struct {
	name    string
	sonames []string // newest first
}{
	Driver: {"CUDA driver", []string{"libcuda.so.1"}},
	CUBLAS: {"cuBLAS", []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}},
	NVRTC:  {"NVRTC", []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}},
	CUDNN:  {"cuDNN", []string{"libcudnn.so.9"}},
	NCCL:   {"NCCL", []string{"libnccl.so.2"}},
}

// String is the library's common name ("cuBLAS").
func (l Lib) String() string {
	if l < 0 || l >= numLibs {
		return fmt.Sprintf("Lib(%d)", int(l))
	}
	return libInfo[l].name
}

// Sonames are the file names tried for l, newest version first.
func (l Lib) Sonames() []string { return append([]string(nil), libInfo[l].sonames...) }

// LibDirEnv is the environment variable naming directories (separated by
// ':') searched before any other place.
const LibDirEnv = "FLOCK_CUDA_LIB_DIR"

// Library is an opened shared library.
type Library struct {
	Lib    Lib
	Path   string  // what dlopen was given: a path, or a bare soname it resolved
	Handle uintptr // dlopen's handle
	Tried  []string
}

// LoadError reports a library that none of the candidates provided.
type LoadError struct {
	Lib   Lib
	Tried []Attempt
}

// Attempt is one candidate of a search and why it did not load.
type Attempt struct {
	Path string
	Err  string
}

func (e *LoadError) Error() string {
	var b strings.Builder
	if e.Lib == Driver {
		b.WriteString("no CUDA driver found")
	} else {
		fmt.Fprintf(&b, "cuda: %s not found", e.Lib)
	}
	if len(e.Tried) > 0 {
		b.WriteString(" (tried ")
		for i, a := range e.Tried {
			if i > 0 {
				b.WriteString(", ")
			}
			switch {
			case a.Err == "" || a.Err == errAbsent:
				b.WriteString(a.Path)
			case strings.HasPrefix(a.Err, a.Path+":"):
				b.WriteString(a.Err) // dlerror names the file already
			default:
				b.WriteString(a.Path + ": " + a.Err)
			}
		}
		b.WriteString(")")
	}
	return b.String()
}

// errAbsent marks a candidate path that does not exist (and was not given to
// dlopen).
const errAbsent = "absent"

// searchEnv is what the search depends on, separated out so that tests can
// give it a directory tree of their own.
type searchEnv struct {
	getenv func(string) string
	glob   func(string) ([]string, error)
	exists func(string) bool
	home   string
}

func osSearchEnv() searchEnv {
	home, _ := os.UserHomeDir()
	return searchEnv{
		getenv: os.Getenv,
		glob:   filepath.Glob,
		exists: func(p string) bool { _, err := os.Stat(p); return err == nil },
		home:   home,
	}
}

// systemDirs are the usual install places of the CUDA toolkit and driver,
// tried after the dynamic loader's own search.
var systemDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/targets/sbsa-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib/wsl/lib",
}

// sitePackagePatterns are glob patterns of Python package directories where
// an installed PyTorch brings the CUDA libraries (under nvidia/*/lib).
func (e searchEnv) sitePackagePatterns() []string {
	var roots []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := e.getenv(v); p != "" {
			roots = append(roots, p+"/lib/python3*/site-packages")
		}
	}
	if e.home != "" {
		roots = append(roots,
			e.home+"/.local/lib/python3*/site-packages",
			e.home+"/.pyenv/versions/*/lib/python3*/site-packages",
			e.home+"/miniconda3/lib/python3*/site-packages",
			e.home+"/anaconda3/lib/python3*/site-packages")
	}
	return append(roots,
		"/opt/conda/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		"/usr/lib/python3*/site-packages",
	)
}

// searchDirs returns the directories searched after the dynamic loader, in
// order: the system install places, then the nvidia/*/lib and torch/lib
// folders of every Python installation found.
func (e searchEnv) searchDirs() []string {
	dirs := append([]string(nil), systemDirs...)
	seen := map[string]bool{}
	for _, d := range dirs {
		seen[d] = true
	}
	for _, pat := range e.sitePackagePatterns() {
		sites, _ := e.glob(pat)
		sort.Strings(sites)
		for _, sp := range sites {
			libs, _ := e.glob(sp + "/nvidia/*/lib")
			sort.Strings(libs)
			torch, _ := e.glob(sp + "/torch/lib")
			for _, d := range append(libs, torch...) {
				if !seen[d] {
					seen[d] = true
					dirs = append(dirs, d)
				}
			}
		}
	}
	return dirs
}

// candidates lists what to hand dlopen for l, in order: every soname in each
// directory of FLOCK_CUDA_LIB_DIR, then the bare sonames (the loader's own
// search: LD_LIBRARY_PATH, the ld cache, the binary's run path), then each
// soname in the install places. Paths in directories are included only when
// the file exists; absent ones are returned separately, to be reported.
func (e searchEnv) candidates(l Lib) (try []string, absent []string) {
	names := libInfo[l].sonames
	inDir := func(d string) {
		for _, n := range names {
			p := filepath.Join(d, n)
			if e.exists(p) {
				try = append(try, p)
			} else {
				absent = append(absent, p)
			}
		}
	}
	for _, d := range strings.Split(e.getenv(LibDirEnv), ":") {
		if d != "" {
			inDir(d)
		}
	}
	try = append(try, names...)
	for _, d := range e.searchDirs() {
		inDir(d)
	}
	return try, absent
}

// dlopen is the opener; tests replace it to observe the order of attempts.
var dlopen = func(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// open finds and opens l.
func (e searchEnv) open(l Lib) (*Library, error) {
	try, absent := e.candidates(l)
	var tried []Attempt
	for _, p := range try {
		h, err := dlopen(p)
		if err == nil {
			paths := make([]string, 0, len(tried)+1)
			for _, a := range tried {
				paths = append(paths, a.Path)
			}
			return &Library{Lib: l, Path: p, Handle: h, Tried: append(paths, p)}, nil
		}
		tried = append(tried, Attempt{Path: p, Err: firstLine(err.Error())})
	}
	// The bare sonames say everything about the loader's search; list the
	// absent install places only by directory, once.
	dirs := map[string]bool{}
	for _, p := range absent {
		d := filepath.Dir(p)
		if !dirs[d] {
			dirs[d] = true
			tried = append(tried, Attempt{Path: d + "/", Err: errAbsent})
		}
	}
	return nil, &LoadError{Lib: l, Tried: tried}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

var libCache struct {
	sync.Mutex
	libs [numLibs]*Library
	errs [numLibs]error
	done [numLibs]bool
}

// Open finds and opens library l once per process: later calls return the
// same Library (or the same error). The search order is FLOCK_CUDA_LIB_DIR,
// the dynamic loader's own search, then /usr/local/cuda/lib64 and the usual
// system directories, then the nvidia/*/lib and torch/lib folders of the
// Python installations found (virtual environments, conda, pyenv, ~/.local
// and the system's site- and dist-packages).
func Open(l Lib) (*Library, error) {
	if l < 0 || l >= numLibs {
		return nil, fmt.Errorf("cuda: unknown library %d", int(l))
	}
	libCache.Lock()
	defer libCache.Unlock()
	if !libCache.done[l] {
		libCache.libs[l], libCache.errs[l] = osSearchEnv().open(l)
		libCache.done[l] = true
	}
	return libCache.libs[l], libCache.errs[l]
}

// Symbol returns the address of name in the library, or 0 when it does not
// export it.
func (lib *Library) Symbol(name string) uintptr {
	if lib == nil {
		return 0
	}
	p, err := purego.Dlsym(lib.Handle, name)
	if err != nil {
		return 0
	}
	return p
}

// Binder binds C functions of a library to typed Go function variables,
// collecting the names of missing ones.
type Binder struct {
	Lib     *Library
	Missing []string
}

// Bind sets *fptr (a pointer to a func variable) to the first of names that
// the library exports; versioned names (cuMemAlloc_v2) come first. When none
// is exported, *fptr stays nil and the first name is added to Missing.
// Functions take and return only integers and pointers.
func (b *Binder) Bind(fptr any, names ...string) {
	for _, n := range names {
		if p := b.Lib.Symbol(n); p != 0 {
			purego.RegisterFunc(fptr, p)
			return
		}
	}
	b.Missing = append(b.Missing, names[0])
}

// Err reports the missing functions, if any.
func (b *Binder) Err() error {
	if len(b.Missing) == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s (%s) lacks %s", b.Lib.Lib, b.Lib.Path, strings.Join(b.Missing, ", "))
}

// IsNotFound reports whether err says a library could not be found.
func IsNotFound(err error) bool {
	var le *LoadError
	return errors.As(err, &le)
}
