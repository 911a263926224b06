// Package term answers questions about the terminal that output goes to.
package term

import (
	"io"
	"os"
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
