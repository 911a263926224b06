// Package term answers questions about the terminal that output goes to
// and writes figures for people to read.
package term

import (
	"fmt"
	"io"
	"os"
	"time"
)

// IsTerminal reports whether w is a character device (a terminal), where
// progress bars may redraw themselves; pipes and files get plain lines.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Bytes writes n bytes in the largest binary unit that keeps it ≥ 1
// ("512 B", "1.5 MiB").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, " KMGT"[u])
}

// Seconds writes a duration of s seconds rounded to a tenth of a second
// ("1m2.3s").
func Seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}
