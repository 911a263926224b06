package tensor

import (
	"fmt"
	"strconv"
	"strings"
)

// Printing elides axes longer than printEdge·2 when the tensor has more than
// printThreshold elements, like NumPy and PyTorch.
const (
	printThreshold = 1000
	printEdge      = 3
)

// String formats t like NumPy: nested brackets, aligned columns, long axes
// elided with "...", followed by the shape, dtype and device.
func (t *Tensor) String() string {
	if t == nil {
		return "tensor(nil)"
	}
	if t.st == nil {
		return "tensor(released)"
	}
	elide := t.NumElements() > printThreshold
	// The indices shown on each axis.
	shown := make([][]int, t.Dim())
	for a, n := range t.shape {
		if elide && n > 2*printEdge {
			for i := 0; i < printEdge; i++ {
				shown[a] = append(shown[a], i)
			}
			shown[a] = append(shown[a], -1) // the "..." marker
			for i := n - printEdge; i < n; i++ {
				shown[a] = append(shown[a], i)
			}
		} else {
			for i := 0; i < n; i++ {
				shown[a] = append(shown[a], i)
			}
		}
	}
	var all []float64
	if !elide {
		all = t.Float64s()
	}
	value := func(idx []int) float64 {
		if all == nil {
			return t.At(idx...)
		}
		off := 0
		for a, i := range idx {
			off = off*t.shape[a] + i
		}
		return all[off]
	}
	// Format every shown value first, to align columns.
	cells := map[string]string{}
	width := 0
	var collect func(idx []int)
	collect = func(idx []int) {
		if len(idx) == t.Dim() {
			s := formatValue(value(idx), t.dtype)
			cells[fmt.Sprint(idx)] = s
			width = max(width, len(s))
			return
		}
		for _, i := range shown[len(idx)] {
			if i >= 0 {
				collect(append(idx, i))
			}
		}
	}
	collect(nil)

	var b strings.Builder
	b.WriteString("tensor(")
	const indent = len("tensor(")
	var write func(idx []int)
	write = func(idx []int) {
		d := len(idx)
		if d == t.Dim() {
			s := cells[fmt.Sprint(idx)]
			b.WriteString(strings.Repeat(" ", width-len(s)))
			b.WriteString(s)
			return
		}
		b.WriteByte('[')
		for k, i := range shown[d] {
			if k > 0 {
				b.WriteByte(',')
				if d == t.Dim()-1 {
					b.WriteByte(' ')
				} else {
					b.WriteString(strings.Repeat("\n", t.Dim()-1-d))
					b.WriteString(strings.Repeat(" ", indent+d+1))
				}
			}
			if i < 0 {
				b.WriteString("...")
				continue
			}
			write(append(idx, i))
		}
		b.WriteByte(']')
	}
	write(nil)
	fmt.Fprintf(&b, ", shape=%v, dtype=%v, device=%s)", t.shape, t.dtype, t.st.dev.Name())
	return b.String()
}

func formatValue(v float64, dt DType) string {
	switch {
	case dt == Bool:
		if v != 0 {
			return "true"
		}
		return "false"
	case dt.IsInt():
		return strconv.FormatInt(int64(v), 10)
	default:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
}
