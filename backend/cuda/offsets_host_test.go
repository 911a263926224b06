package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// offsetsHarness prints, for each linear element i of a view, the offsets
// that offsets<2> of kernels/common.cuh gives in two operands. Arguments:
// nd, then nd extents, then nd strides of each operand.
const offsetsHarness = `#include "common.cuh"
int main(int argc, char **argv) {
  int nd = atoi(argv[1]);
  Dims shape = {}, st[2] = {};
  i64 n = 1;
  for (int d = 0; d < nd; d++) {
    shape.v[d] = atoll(argv[2 + d]);
    st[0].v[d] = atoll(argv[2 + nd + d]);
    st[1].v[d] = atoll(argv[2 + 2 * nd + d]);
    n *= shape.v[d];
  }
  for (i64 i = 0; i < n; i++) {
    i64 o[2];
    offsets<2>(i, nd, shape, st, o);
    printf("%lld %lld\n", o[0], o[1]);
  }
  return 0;
}
`

// TestOffsetsOnHost compiles the strided-offset walk that every elementwise,
// gather and reduction kernel uses as host C++ (when a C++ compiler is
// installed) and checks it against row-major unravelling, for 1 to 8 axes
// with zero (broadcast), negative and transposed strides.
func TestOffsetsOnHost(t *testing.T) {
	t.Parallel()
	exe := compileOnHost(t, "kernels/common.cuh", offsetsHarness)
	r := rand.New(rand.NewPCG(1, 2))
	for nd := 1; nd <= 8; nd++ {
		shape := make([]int64, nd)
		st := [2][]int64{make([]int64, nd), make([]int64, nd)}
		for d := range shape {
			shape[d] = 1 + r.Int64N(3)
			for k := range st {
				st[k][d] = r.Int64N(41) - 20 // zero and negative strides included
			}
		}
		args := []string{strconv.Itoa(nd)}
		for _, v := range [][]int64{shape, st[0], st[1]} {
			for _, x := range v {
				args = append(args, strconv.FormatInt(x, 10))
			}
		}
		out, err := exec.Command(exe, args...).Output()
		if err != nil {
			t.Fatalf("offsets %v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		idx := make([]int64, nd)
		for i, line := range lines {
			var want [2]int64
			for k := range want {
				for d := range nd {
					want[k] += idx[d] * st[k][d]
				}
			}
			if got := fmt.Sprintf("%d %d", want[0], want[1]); line != got {
				t.Fatalf("nd %d, shape %v, strides %v: element %d at %q, want %q", nd, shape, st, i, line, got)
			}
			for d := nd - 1; d >= 0; d-- { // row-major successor
				if idx[d]++; idx[d] < shape[d] {
					break
				}
				idx[d] = 0
			}
		}
		n := int64(1)
		for _, e := range shape {
			n *= e
		}
		if int64(len(lines)) != n {
			t.Errorf("nd %d: %d elements, want %d", nd, len(lines), n)
		}
	}
}
