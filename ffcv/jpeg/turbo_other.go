//go:build !(linux || darwin || freebsd)

package jpeg

import (
	"errors"

	"github.com/flockml/flock/ffcv/transform"
)

type turboHandle struct{ fastDCT, fastUpsample bool }

func newTurboHandle() (*turboHandle, error) {
	return nil, errors.New("libturbojpeg loading is not supported on this platform")
}

func (t *turboHandle) close() {}

func (t *turboHandle) decode(dst transform.Image, data []byte, denom int) error {
	panic("jpeg: turbo decode without a handle")
}

// TurboAvailable reports whether libjpeg-turbo can be loaded, and if not,
// why: reason is empty exactly when ok is true.
func TurboAvailable() (ok bool, reason string) {
	_, err := newTurboHandle()
	return false, err.Error()
}
