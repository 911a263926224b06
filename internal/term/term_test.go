package term

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file reported as a terminal")
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer reported as a terminal")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if !IsTerminal(tty) {
			t.Error("/dev/tty not reported as a terminal")
		}
	}
}

func TestBytesAndSeconds(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB", 5 << 40: "5.0 TiB", 2048 << 40: "2048.0 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for s, want := range map[float64]string{0.04: "0s", 0.25: "300ms", 62.34: "1m2.3s"} {
		if got := Seconds(s); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", s, got, want)
		}
	}
}
