//go:build linux || darwin || freebsd

package jpeg

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/flockml/flock/ffcv/transform"
)

// libjpeg-turbo's TurboJPEG API (turbojpeg.h, version 2 functions, present
// in every libturbojpeg.so.0 since 1.4).
const (
	tjpfRGB  = 0
	tjpfGray = 6

	tjflagFastUpsample = 256
	tjflagFastDCT      = 2048
)

var turboNames = []string{"libturbojpeg.so.0", "libturbojpeg.so", "libturbojpeg.0.dylib", "libturbojpeg.dylib"}

type turboLib struct {
	initDecompress, decompressHeader3, getScalingFactors uintptr
	decompress2, destroy, getErrorStr2                   uintptr
	scales                                               [][2]int32 // (num, denom) pairs
}

var (
	turboOnce sync.Once
	turbo     *turboLib
	turboErr  error
)

func loadTurbo() (*turboLib, error) {
	turboOnce.Do(func() { turbo, turboErr = openTurbo(turboNames) })
	return turbo, turboErr
}

func openTurbo(names []string) (*turboLib, error) {
	var h uintptr
	var errs []error
	for _, name := range names {
		var err error
		h, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			break
		}
		errs = append(errs, err)
	}
	if h == 0 {
		return nil, fmt.Errorf("libturbojpeg not found: %w", errors.Join(errs...))
	}
	l := &turboLib{}
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.initDecompress, "tjInitDecompress"},
		{&l.decompressHeader3, "tjDecompressHeader3"},
		{&l.getScalingFactors, "tjGetScalingFactors"},
		{&l.decompress2, "tjDecompress2"},
		{&l.destroy, "tjDestroy"},
		{&l.getErrorStr2, "tjGetErrorStr2"},
	} {
		fn, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("libturbojpeg: %s: %w", s.name, err)
		}
		*s.p = fn
	}
	var n int32
	p, _, _ := purego.SyscallN(l.getScalingFactors, uintptr(unsafe.Pointer(&n)))
	if p == 0 || n <= 0 || n > 64 {
		return nil, errors.New("libturbojpeg: tjGetScalingFactors failed")
	}
	// The table is static memory inside the library.
	sf := unsafe.Slice((*[2]int32)(unsafe.Add(nil, p)), n)
	l.scales = append([][2]int32(nil), sf...)
	return l, nil
}

// TurboAvailable reports whether libjpeg-turbo can be loaded, and if not,
// why: reason is empty exactly when ok is true.
func TurboAvailable() (ok bool, reason string) {
	if _, err := loadTurbo(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// turboHandle is one tjhandle with the out-parameters of the header call
// kept on the heap, so calls do not allocate.
type turboHandle struct {
	lib                 *turboLib
	h                   uintptr
	w, hgt, subsamp, cs int32
	fastUpsample        bool
	fastDCT             bool

	// args holds a call's arguments so that calls do not allocate, and
	// keepData and keepPix make the Go memory whose addresses they carry
	// escape to the (non-moving) heap and stay alive during the call.
	args              [9]uintptr
	keepData, keepPix []byte
}

func newTurboHandle() (*turboHandle, error) {
	l, err := loadTurbo()
	if err != nil {
		return nil, err
	}
	h, _, _ := purego.SyscallN(l.initDecompress)
	if h == 0 {
		return nil, errors.New("libturbojpeg: tjInitDecompress failed")
	}
	return &turboHandle{lib: l, h: h}, nil
}

func (t *turboHandle) close() {
	if t.h != 0 {
		purego.SyscallN(t.lib.destroy, t.h)
		t.h = 0
	}
}

func (t *turboHandle) errorf(op string) error {
	p, _, _ := purego.SyscallN(t.lib.getErrorStr2, t.h)
	msg := "unknown error"
	if p != 0 {
		msg = cString(p)
	}
	return fmt.Errorf("jpeg: decode: libturbojpeg %s: %s", op, msg)
}

// cString copies the NUL-terminated C string at p (at most 1024 bytes),
// reading no byte past the terminator.
func cString(p uintptr) string {
	base := unsafe.Add(nil, p)
	n := 0
	for n < 1024 && *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

func (t *turboHandle) decode(dst transform.Image, data []byte, denom int) error {
	if len(data) == 0 {
		return errors.New("jpeg: decode: empty data")
	}
	t.keepData = data
	defer func() { t.keepData, t.keepPix = nil, nil }()
	t.args = [9]uintptr{t.h, uintptr(unsafe.Pointer(&t.keepData[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&t.w)), uintptr(unsafe.Pointer(&t.hgt)),
		uintptr(unsafe.Pointer(&t.subsamp)), uintptr(unsafe.Pointer(&t.cs))}
	r, _, _ := purego.SyscallN(t.lib.decompressHeader3, t.args[:7]...)
	if int32(r) != 0 {
		return t.errorf("header")
	}
	num := int32(0)
	for _, s := range t.lib.scales {
		if s[0] == 1 && s[1] == int32(denom) {
			num = 1
			break
		}
	}
	if num == 0 {
		return fmt.Errorf("jpeg: decode: libturbojpeg has no 1/%d scaling", denom)
	}
	sw, sh := ScaledSize(int(t.w), int(t.hgt), denom)
	if sw != dst.Width || sh != dst.Height {
		return fmt.Errorf("jpeg: decode: %dx%d image at 1/%d is %dx%d, destination is %dx%d", t.w, t.hgt, denom, sw, sh, dst.Width, dst.Height)
	}
	pf := tjpfRGB
	if dst.Channels == 1 {
		pf = tjpfGray
	}
	flags := 0
	if t.fastUpsample {
		flags |= tjflagFastUpsample
	}
	if t.fastDCT {
		flags |= tjflagFastDCT
	}
	t.keepPix = dst.Pix
	t.args = [9]uintptr{t.h, uintptr(unsafe.Pointer(&t.keepData[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&t.keepPix[0])), uintptr(sw), uintptr(dst.Stride), uintptr(sh),
		uintptr(pf), uintptr(flags)}
	r, _, _ = purego.SyscallN(t.lib.decompress2, t.args[:]...)
	if int32(r) != 0 {
		return t.errorf("decompress")
	}
	return nil
}
