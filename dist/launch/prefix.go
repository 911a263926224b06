package launch

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// maxLine is the longest line a rank's output is kept whole for; a longer
// one is broken into lines of maxLine bytes, each with the prefix.
const maxLine = 64 << 10

// prefixWriter writes a rank's output to w one whole line at a time, each
// line preceded by "[rank] ". The ranks of a node share mu, so that their
// lines never mix within a line.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte // the incomplete last line
	out    []byte
}

func newPrefixWriter(mu *sync.Mutex, w io.Writer, rank int) *prefixWriter {
	return &prefixWriter{mu: mu, w: w, prefix: []byte("[" + strconv.Itoa(rank) + "] ")}
}

// Write writes the complete lines of buf+p and keeps the rest. It reports
// len(p) even when w fails: a rank must not be stopped by its launcher's
// output going away.
func (pw *prefixWriter) Write(p []byte) (int, error) {
	pw.buf = append(pw.buf, p...)
	pw.out = pw.out[:0]
	rest := pw.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 && len(rest) < maxLine {
			break
		}
		line := rest
		switch {
		case i >= 0 && i < maxLine:
			line, rest = rest[:i+1], rest[i+1:]
		default:
			line, rest = rest[:maxLine], rest[maxLine:]
		}
		pw.out = append(pw.out, pw.prefix...)
		pw.out = append(pw.out, line...)
		if line[len(line)-1] != '\n' {
			pw.out = append(pw.out, '\n')
		}
	}
	pw.buf = append(pw.buf[:0], rest...)
	pw.emit()
	return len(p), nil
}

// Flush writes the incomplete last line, ended by a newline.
func (pw *prefixWriter) Flush() {
	pw.out = pw.out[:0]
	if len(pw.buf) > 0 {
		pw.out = append(pw.out, pw.prefix...)
		pw.out = append(pw.out, pw.buf...)
		pw.out = append(pw.out, '\n')
		pw.buf = pw.buf[:0]
	}
	pw.emit()
}

func (pw *prefixWriter) emit() {
	if len(pw.out) == 0 {
		return
	}
	pw.mu.Lock()
	pw.w.Write(pw.out)
	pw.mu.Unlock()
}
