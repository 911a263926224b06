package netmodel

import (
	"fmt"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// TestCosts checks each formula against costs worked out by hand.
func TestCosts(t *testing.T) {
	t.Parallel()
	// α = 1 ms, β = 1 MB/s: a 1 MB message takes 1.001 s.
	ring := Network{Name: "test", Latency: 1e-3, Bandwidth: 1e6, AllReduce: "ring"}
	hd := ring
	hd.AllReduce = "halving-doubling"
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"send 1 MB", ring.Send(1e6), 1.001},
		// p = 4: 2·3 = 6 latencies, 2·3/4 · 1 s = 1.5 s.
		{"ring p=4 1 MB", ring.AllReduceTime(4, 1e6), 0.006 + 1.5},
		// p = 64: 126 latencies, 2·63/64 s.
		{"ring p=64 1 MB", ring.AllReduceTime(64, 1e6), 0.126 + 1.96875},
		// p = 64: 2·6 = 12 latencies, same bytes.
		{"halving-doubling p=64 1 MB", hd.AllReduceTime(64, 1e6), 0.012 + 1.96875},
		// p = 6 rounds up to 3 halvings: 6 latencies, 2·5/6 s.
		{"halving-doubling p=6 1 MB", hd.AllReduceTime(6, 1e6), 0.006 + 10.0/6},
		{"all-reduce p=1", ring.AllReduceTime(1, 1e6), 0},
		// The exponential graph on 64 nodes: 6 neighbours, 6 × 1.001 s.
		{"neighbours d=6 1 MB", ring.NeighborTime(6, 1e6), 6.006},
		{"neighbours d=1 500 kB", ring.NeighborTime(1, 5e5), 0.501},
		{"pair 250 kB", ring.PairTime(2.5e5), 0.251},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s: %v s, want %v s", c.name, c.got, c.want)
		}
	}
}

// TestProject checks a projected run: 100 steps of 10 ms and 25 ring
// all-reduces of 2 MB on 8 nodes of α = 1 ms, β = 1 MB/s.
func TestProject(t *testing.T) {
	t.Parallel()
	n := Network{Name: "test", Latency: 1e-3, Bandwidth: 1e6, AllReduce: "ring"}
	w := Workload{Steps: 100, StepCompute: 0.01, Syncs: 25, Pattern: AllReduce, Bytes: 2e6}
	total, comm := n.Project(8, w)
	// One all-reduce: 14 ms + 2·7/8 · 2 s = 3.514 s; 25 of them 87.85 s.
	if !near(comm, 87.85) || !near(total, 88.85) {
		t.Errorf("Project = %v s (comm %v s), want 88.85 s (comm 87.85 s)", total, comm)
	}
	w.Pattern, w.Degree = Neighbors, 3
	if _, comm := n.Project(8, w); !near(comm, 25*3*2.001) {
		t.Errorf("neighbours: comm %v s, want %v s", comm, 25*3*2.001)
	}
	w.Pattern = Pairwise
	if _, comm := n.Project(8, w); !near(comm, 25*2.001) {
		t.Errorf("pairwise: comm %v s, want %v s", comm, 25*2.001)
	}
}

func TestLog2(t *testing.T) {
	t.Parallel()
	for p, want := range map[int]int{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 64: 6, 65: 7} {
		if got := Log2(p); got != want {
			t.Errorf("Log2(%d) = %d, want %d", p, got, want)
		}
	}
}

func TestPresetAndValidate(t *testing.T) {
	t.Parallel()
	for _, p := range Presets {
		n, err := Preset(p.Name)
		if err != nil || n != p {
			t.Errorf("Preset(%q) = %v, %v", p.Name, n, err)
		}
		if err := n.Validate(); err != nil {
			t.Errorf("preset %s: %v", p.Name, err)
		}
	}
	if _, err := Preset("token-ring"); err == nil {
		t.Error("Preset(token-ring): no error")
	}
	for _, n := range []Network{
		{Name: "a", Latency: -1, Bandwidth: 1, AllReduce: "ring"},
		{Name: "b", Latency: 0, Bandwidth: 0, AllReduce: "ring"},
		{Name: "c", Latency: math.NaN(), Bandwidth: 1, AllReduce: "ring"},
		{Name: "d", Latency: 0, Bandwidth: 1, AllReduce: "tree"},
	} {
		if err := n.Validate(); err == nil {
			t.Errorf("%+v: no error", n)
		}
	}
}

// Example projects 10 epochs of data parallel training of a 100 MB model
// on 64 nodes over 10 Gb Ethernet.
func Example() {
	n, _ := Preset("10gbe")
	w := Workload{Steps: 1000, StepCompute: 0.1, Syncs: 1000, Pattern: AllReduce, Bytes: 100e6}
	total, comm := n.Project(64, w)
	fmt.Printf("%.0f s, %.0f s of it communicating\n", total, comm)
	// Output: 261 s, 161 s of it communicating
}
