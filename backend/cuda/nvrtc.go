package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nvrtc is the run-time compiler of CUDA C (libnvrtc), which turns the
// embedded kernel sources into PTX for the installed driver.
type nvrtc struct {
	lib *Library

	nvrtcVersion           func(major, minor *int32) int32
	nvrtcGetErrorString    func(res int32) string
	nvrtcCreateProgram     func(prog *uintptr, src, name *byte, nHeaders int32, headers, includeNames **byte) int32
	nvrtcCompileProgram    func(prog uintptr, nOptions int32, options **byte) int32
	nvrtcGetPTXSize        func(prog uintptr, size *uint64) int32
	nvrtcGetPTX            func(prog uintptr, ptx *byte) int32
	nvrtcGetProgramLogSize func(prog uintptr, size *uint64) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
}

const (
	nvrtcSuccess            = 0
	nvrtcErrInvalidOption   = 5
	nvrtcErrCompilation     = 6
	nvrtcErrBuiltinNotFound = 7
)

func loadNVRTC() (*nvrtc, error) {
	lib, err := Open(NVRTC)
	if err != nil {
		return nil, err
	}
	n := &nvrtc{lib: lib}
	b := &Binder{Lib: lib}
	b.Bind(&n.nvrtcVersion, "nvrtcVersion")
	b.Bind(&n.nvrtcGetErrorString, "nvrtcGetErrorString")
	b.Bind(&n.nvrtcCreateProgram, "nvrtcCreateProgram")
	b.Bind(&n.nvrtcCompileProgram, "nvrtcCompileProgram")
	b.Bind(&n.nvrtcGetPTXSize, "nvrtcGetPTXSize")
	b.Bind(&n.nvrtcGetPTX, "nvrtcGetPTX")
	b.Bind(&n.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
	b.Bind(&n.nvrtcGetProgramLog, "nvrtcGetProgramLog")
	b.Bind(&n.nvrtcDestroyProgram, "nvrtcDestroyProgram")
	if err := b.Err(); err != nil {
		return nil, err
	}
	if err := n.loadBuiltins(); err != nil {
		return nil, err
	}
	return n, nil
}

// loadBuiltins opens libnvrtc-builtins.so.<major>.<minor> from the directory
// libnvrtc came from. NVRTC opens it by bare name on each compilation, which
// only the dynamic loader's own search resolves; a library found elsewhere
// (FLOCK_CUDA_LIB_DIR, a Python wheel's nvidia/*/lib) is found then because
// it is already loaded under that name.
func (n *nvrtc) loadBuiltins() error {
	if !strings.ContainsRune(n.lib.Path, '/') {
		return nil // found by the loader, which finds the builtins too
	}
	var ma, mi int32
	if res := n.nvrtcVersion(&ma, &mi); res != nvrtcSuccess {
		return n.check("nvrtcVersion", res)
	}
	p := filepath.Join(filepath.Dir(n.lib.Path), fmt.Sprintf("libnvrtc-builtins.so.%d.%d", ma, mi))
	if _, err := os.Stat(p); err != nil {
		return nil // a layout of its own; NVRTC reports what it misses
	}
	if _, err := dlopen(p); err != nil {
		return fmt.Errorf("cuda: NVRTC's builtins %s: %w", p, err)
	}
	return nil
}

func (n *nvrtc) check(call string, res int32) error {
	if res == nvrtcSuccess {
		return nil
	}
	return &Error{Call: call, Code: int(res), Desc: n.nvrtcGetErrorString(res)}
}

// Version is NVRTC's version as "12.4".
func (n *nvrtc) Version() string {
	var ma, mi int32
	if n.nvrtcVersion(&ma, &mi) != nvrtcSuccess {
		return "?"
	}
	return fmt.Sprintf("%d.%d", ma, mi)
}

// compile turns the source of one file (with the headers it includes, by
// name) into PTX for the virtual architecture arch ("compute_80").
func (n *nvrtc) compile(name, src string, headers map[string]string, arch string) ([]byte, error) {
	ptx, _, err := n.compileLog(name, src, headers, arch)
	return ptx, err
}

// compileLog is compile that returns NVRTC's log as well: its warnings when
// the compilation succeeds.
func (n *nvrtc) compileLog(name, src string, headers map[string]string, arch string) (ptx []byte, log string, err error) {
	var hdrs, names []*byte
	for k, v := range headers {
		names = append(names, cString(k))
		hdrs = append(hdrs, cString(v))
	}
	var hp, np **byte
	if len(hdrs) > 0 {
		hp, np = &hdrs[0], &names[0]
	}
	var prog uintptr
	if err := n.check("nvrtcCreateProgram", n.nvrtcCreateProgram(&prog, cString(src), cString(name), int32(len(hdrs)), hp, np)); err != nil {
		return nil, "", err
	}
	defer n.nvrtcDestroyProgram(&prog)
	opts := []*byte{cString("--gpu-architecture=" + arch), cString("--std=c++14")}
	res := n.nvrtcCompileProgram(prog, int32(len(opts)), &opts[0])
	log = n.log(prog)
	if res != nvrtcSuccess {
		err := n.check("nvrtcCompileProgram", res)
		if log != "" {
			err = fmt.Errorf("%w\n%s", err, log)
		}
		return nil, "", err
	}
	var size uint64
	if err := n.check("nvrtcGetPTXSize", n.nvrtcGetPTXSize(prog, &size)); err != nil {
		return nil, "", err
	}
	ptx = make([]byte, size)
	if size > 0 {
		if err := n.check("nvrtcGetPTX", n.nvrtcGetPTX(prog, &ptx[0])); err != nil {
			return nil, "", err
		}
	}
	return ptx, log, nil
}

func (n *nvrtc) log(prog uintptr) string {
	var size uint64
	if n.nvrtcGetProgramLogSize(prog, &size) != nvrtcSuccess || size <= 1 {
		return ""
	}
	b := make([]byte, size)
	if n.nvrtcGetProgramLog(prog, &b[0]) != nvrtcSuccess {
		return ""
	}
	return strings.TrimRight(string(b), "\x00\n")
}
