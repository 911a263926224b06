//go:build linux || darwin || freebsd

package jpeg

import (
	"strings"
	"testing"
)

func TestTurboMissing(t *testing.T) {
	if _, err := openTurbo([]string{"libturbojpeg-missing.so.9"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("loading a missing library: %v", err)
	}
}
