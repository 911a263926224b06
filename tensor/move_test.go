package tensor

import (
	"slices"
	"testing"

	"github.com/flockml/flock/backend/cpu"
)

// TestMoveTo checks that MoveTo moves a tensor's values to another device
// in place, that a view taken before keeps the old storage, and that
// moving to the device a tensor is on changes nothing.
func TestMoveTo(t *testing.T) {
	other := cpu.New()
	a := FromSlice([]float32{1, 2, 3, 4, 5, 6}, Shape{2, 3})
	defer a.Release()
	col := a.Slice(1, 1, 2) // a strided view
	defer col.Release()
	b := col.Contiguous()
	defer b.Release()
	view := a.Retain()
	defer view.Release()
	b.MoveTo(other)
	if b.Device() != other || !slices.Equal(b.Float32s(), []float32{2, 5}) {
		t.Errorf("moved view of a column: on %v, %v", b.Device(), b.Float32s())
	}
	a.MoveTo(other)
	if a.Device() != other || !slices.Equal(a.Float32s(), []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("moved: on %v, %v", a.Device(), a.Float32s())
	}
	if view.Device() == other || view.SharesStorage(a) {
		t.Errorf("a view taken before the move followed it")
	}
	a.Fill(7)
	if view.Float32s()[0] != 1 {
		t.Errorf("writing the moved tensor changed the old storage")
	}
	a.MoveTo(other)
	if a.Float32s()[0] != 7 {
		t.Errorf("moving to the same device changed the values")
	}
}
