package netmodel

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Network is a network in the α–β model.
type Network struct {
	// Name says what the network is, for people.
	Name string `json:"name"`
	// Latency is α, the seconds a message takes before its first byte.
	Latency float64 `json:"latency_s"`
	// Bandwidth is β, the bytes per second of one link in each direction.
	Bandwidth float64 `json:"bandwidth_bytes_per_s"`
	// AllReduce is the all-reduce algorithm: "ring" or
	// "halving-doubling".
	AllReduce string `json:"allreduce"`
}

// Presets are the named networks.
var Presets = []Network{
	{Name: "10gbe", Latency: 25e-6, Bandwidth: 1.25e9, AllReduce: "ring"},
	{Name: "ib100", Latency: 2e-6, Bandwidth: 12.5e9, AllReduce: "ring"},
	{Name: "wan", Latency: 40e-3, Bandwidth: 125e6, AllReduce: "ring"},
	{Name: "nvlink", Latency: 5e-6, Bandwidth: 200e9, AllReduce: "ring"},
}

// AllReduces lists the accepted values of Network.AllReduce.
var AllReduces = []string{"ring", "halving-doubling"}

// Preset returns the network named name.
func Preset(name string) (Network, error) {
	var names []string
	for _, n := range Presets {
		if n.Name == name {
			return n, nil
		}
		names = append(names, n.Name)
	}
	return Network{}, fmt.Errorf("netmodel: unknown network %q (want %s)", name, strings.Join(names, ", "))
}

// Validate reports a network whose parameters are out of range.
func (n Network) Validate() error {
	switch {
	case !(n.Latency >= 0) || math.IsInf(n.Latency, 0):
		return fmt.Errorf("netmodel: %s: latency %v s: want a finite value ≥ 0", n.Name, n.Latency)
	case !(n.Bandwidth > 0) || math.IsInf(n.Bandwidth, 0):
		return fmt.Errorf("netmodel: %s: bandwidth %v B/s: want a finite value > 0", n.Name, n.Bandwidth)
	case n.AllReduce != "ring" && n.AllReduce != "halving-doubling":
		return fmt.Errorf("netmodel: %s: all-reduce %q: want %s", n.Name, n.AllReduce, strings.Join(AllReduces, " or "))
	}
	return nil
}

// Send is the time of one message of bytes over one link: α + n/β.
func (n Network) Send(bytes float64) float64 {
	return n.Latency + bytes/n.Bandwidth
}

// Log2 returns ⌈log₂ p⌉ for p ≥ 1.
func Log2(p int) int {
	if p < 1 {
		panic("netmodel: fewer than one node")
	}
	return bits.Len(uint(p - 1))
}

// AllReduceTime is the time of an all-reduce of bytes over p nodes with
// n's algorithm: 2(p−1)·α + 2(p−1)/p · n/β for the ring,
// 2⌈log₂ p⌉·α + 2(p−1)/p · n/β for halving and doubling; 0 for p = 1.
func (n Network) AllReduceTime(p int, bytes float64) float64 {
	if p < 1 {
		panic("netmodel: fewer than one node")
	}
	if p == 1 {
		return 0
	}
	rounds := 2 * (p - 1)
	if n.AllReduce == "halving-doubling" {
		rounds = 2 * Log2(p)
	}
	return float64(rounds)*n.Latency + 2*float64(p-1)/float64(p)*bytes/n.Bandwidth
}

// NeighborTime is the time for a node to send bytes to each of degree
// out-neighbours, one after another: d·(α + n/β).
func (n Network) NeighborTime(degree int, bytes float64) float64 {
	if degree < 0 {
		panic("netmodel: negative degree")
	}
	return float64(degree) * n.Send(bytes)
}

// PairTime is the time for two nodes to swap bytes each: α + n/β.
func (n Network) PairTime(bytes float64) float64 {
	return n.Send(bytes)
}

// Pattern is the communication a strategy repeats at each
// synchronization.
type Pattern string

// The patterns.
const (
	AllReduce Pattern = "allreduce"
	Neighbors Pattern = "neighbors"
	Pairwise  Pattern = "pairwise"
)

// Workload is what a run does, per node, in the terms the model costs.
type Workload struct {
	// Steps is the number of optimizer steps and StepCompute the seconds of
	// computation of one.
	Steps       int
	StepCompute float64
	// Syncs is the number of synchronizations, each a Pattern of Bytes
	// (the message n); Degree is the out-degree of Neighbors.
	Syncs   int64
	Pattern Pattern
	Bytes   float64
	Degree  int
}

// SyncTime is the time of one of w's synchronizations over p nodes.
func (n Network) SyncTime(p int, w Workload) float64 {
	switch w.Pattern {
	case AllReduce:
		return n.AllReduceTime(p, w.Bytes)
	case Neighbors:
		return n.NeighborTime(w.Degree, w.Bytes)
	case Pairwise:
		return n.PairTime(w.Bytes)
	}
	panic("netmodel: unknown pattern " + string(w.Pattern))
}

// Project returns the wall-clock time of w on p nodes of n, and the part
// of it spent communicating: Steps·StepCompute + Syncs·SyncTime.
func (n Network) Project(p int, w Workload) (total, comm float64) {
	comm = float64(w.Syncs) * n.SyncTime(p, w)
	return float64(w.Steps)*w.StepCompute + comm, comm
}
