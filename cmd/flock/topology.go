package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/flockml/flock/gossip"
)

func init() {
	extraCommands = append(extraCommands, command{"topology", "print a gossip topology's weights, degrees and ρ", runTopology, topologyHelp})
}

const (
	// topologyMaxNodes bounds --n: ρ takes an SVD of the n×n matrix.
	topologyMaxNodes = 1024
	// topologyMatrixNodes is the largest n printed as a matrix; above it
	// flock topology prints each node's row as a list.
	topologyMatrixNodes = 16
	// topologyListed is how many in-neighbours a row lists in that form.
	topologyListed = 8
)

// topologyOptions are the flags of flock topology.
type topologyOptions struct {
	spec gossip.Spec
	iter int
	json bool
}

func topologyFlags(o *topologyOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock topology", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.spec.Kind, "kind", o.spec.Kind, "topology: "+strings.Join(gossip.Kinds(), ", "))
	fs.IntVar(&o.spec.N, "n", o.spec.N, fmt.Sprintf("`N` nodes, 1 to %d", topologyMaxNodes))
	fs.IntVar(&o.iter, "iter", o.iter, "iteration `K` whose matrix W(K) to print (one-peer-exp and matching change with K)")
	fs.StringVar(&o.spec.Base, "base", o.spec.Base, "base graph of matching: ring, torus, sym-exp, full")
	fs.Uint64Var(&o.spec.Seed, "seed", o.spec.Seed, "seed of matching")
	fs.BoolVar(&o.json, "json", o.json, "print one JSON record: ρ and every node's weights")
	return fs
}

func defaultTopology() topologyOptions {
	return topologyOptions{spec: gossip.Spec{Kind: "exp", N: 16, Base: "full", Seed: 1}}
}

func topologyHelp(w io.Writer) {
	o := defaultTopology()
	fs := topologyFlags(&o)
	fmt.Fprintf(w, `Usage: flock topology [flags]

Print the mixing matrix W(K) of a decentralized-training topology, where
each node takes x_i ← Σ_j w_ij x_j at iteration K, each node's in- and
out-degree (the nodes it receives from and sends to, itself left out), and
ρ = ‖W − 11ᵀ/n‖₂, how much one iteration shrinks the nodes' distance to
their average (0: exact averaging). For one-peer-exp it also prints ρ of
the product of one period, τ = ⌈log₂ n⌉ iterations from K.

Up to %d nodes W is printed as a matrix (3 decimals, · for 0); above, each
node's row is a line: its degrees, its self weight w_ii and its first %d
in-neighbours j with w_ij. --json prints everything at full precision.

Flags:
`, topologyMatrixNodes, topologyListed)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Examples:
  flock topology --kind exp --n 16
  flock topology --kind one-peer-exp --n 8 --iter 2
  flock topology --kind matching --base torus --n 16 --iter 3 --seed 7
`)
}

// topologyNode is a node's record in flock topology --json.
type topologyNode struct {
	Node int               `json:"node"`
	Self float64           `json:"self"`
	In   []gossip.Neighbor `json:"in"`
	Out  []gossip.Neighbor `json:"out"`
}

// topologyRecord is the record of flock topology --json.
type topologyRecord struct {
	Kind     string  `json:"kind"`
	Topology string  `json:"topology"`
	N        int     `json:"n"`
	Iter     int     `json:"iter"`
	Period   int     `json:"period"`
	Rho      float64 `json:"rho"`
	// RhoPeriod is ρ of W(iter+period−1)⋯W(iter), for time-varying
	// periodic topologies only.
	RhoPeriod *float64       `json:"rho_period,omitempty"`
	Nodes     []topologyNode `json:"nodes"`
}

func runTopology(args []string, stdout, stderr io.Writer) int {
	o := defaultTopology()
	fs := topologyFlags(&o)
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "flock topology: "+format+"; run 'flock topology --help' for usage\n", a...)
		return exitUsage
	}
	if helpAsked(args) {
		topologyHelp(stdout)
		return exitOK
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			topologyHelp(stdout)
			return exitOK
		}
		return bad("%v", err)
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	if o.spec.Kind != "matching" {
		var only []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "base" || f.Name == "seed" {
				only = append(only, "--"+f.Name)
			}
		})
		if len(only) > 0 {
			return bad("%s: only for --kind matching", strings.Join(only, " and "))
		}
		o.spec.Base = ""
	}
	if o.spec.N < 1 || o.spec.N > topologyMaxNodes {
		return bad("--n %d, want 1 to %d nodes", o.spec.N, topologyMaxNodes)
	}
	if o.iter < 0 {
		return bad("--iter %d, want K ≥ 0", o.iter)
	}
	top, err := gossip.New(o.spec)
	if err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), "gossip: "))
	}

	n, k := top.Nodes(), o.iter
	rec := topologyRecord{Kind: o.spec.Kind, Topology: top.String(), N: n, Iter: k, Period: top.Period(),
		Rho: gossip.Rho(gossip.Matrix(top, k))}
	if p := top.Period(); p > 1 {
		r := gossip.Rho(gossip.Product(top, k, p))
		rec.RhoPeriod = &r
	}
	for i := range n {
		self, in := top.In(k, i)
		_, out := top.Out(k, i)
		if in == nil {
			in = []gossip.Neighbor{}
		}
		if out == nil {
			out = []gossip.Neighbor{}
		}
		rec.Nodes = append(rec.Nodes, topologyNode{Node: i, Self: self, In: in, Out: out})
	}
	if o.json {
		_ = json.NewEncoder(stdout).Encode(rec)
		return exitOK
	}
	printTopology(stdout, rec)
	return exitOK
}

// printTopology writes rec for people: the weights, the degrees and ρ.
func printTopology(w io.Writer, rec topologyRecord) {
	n := rec.N
	fmt.Fprintf(w, "%s: W(%d), row i holds node i's weights w_ij (x_i ← Σ_j w_ij x_j)\n", rec.Topology, rec.Iter)
	if n <= topologyMatrixNodes {
		fmt.Fprintf(w, "%4s ", "i\\j")
		for j := range n {
			fmt.Fprintf(w, " %5d", j)
		}
		fmt.Fprintf(w, "  %4s %4s\n", "in", "out")
		for _, nd := range rec.Nodes {
			row := make([]float64, n)
			row[nd.Node] = nd.Self
			for _, l := range nd.In {
				row[l.Node] = l.Weight
			}
			fmt.Fprintf(w, "%4d ", nd.Node)
			for _, v := range row {
				if v == 0 {
					fmt.Fprintf(w, " %5s", "·")
				} else {
					fmt.Fprintf(w, " %5.3f", v)
				}
			}
			fmt.Fprintf(w, "  %4d %4d\n", len(nd.In), len(nd.Out))
		}
	} else {
		fmt.Fprintf(w, "%4s %4s %4s %6s  %s\n", "node", "in", "out", "self", "in-neighbours j (w_ij)")
		for _, nd := range rec.Nodes {
			fmt.Fprintf(w, "%4d %4d %4d %6.4f ", nd.Node, len(nd.In), len(nd.Out), nd.Self)
			for x, l := range nd.In {
				if x == topologyListed {
					fmt.Fprintf(w, " … %d more", len(nd.In)-x)
					break
				}
				fmt.Fprintf(w, " %d (%.4f)", l.Node, l.Weight)
			}
			fmt.Fprintln(w)
		}
	}
	inMin, inMax, outMin, outMax := n, 0, n, 0
	for _, nd := range rec.Nodes {
		inMin, inMax = min(inMin, len(nd.In)), max(inMax, len(nd.In))
		outMin, outMax = min(outMin, len(nd.Out)), max(outMax, len(nd.Out))
	}
	span := func(lo, hi int) string {
		if lo == hi {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d to %d", lo, hi)
	}
	fmt.Fprintf(w, "degrees: in %s, out %s\n", span(inMin, inMax), span(outMin, outMax))
	fmt.Fprintf(w, "ρ = ‖W − 11ᵀ/n‖₂ = %.4f\n", rec.Rho)
	if rec.RhoPeriod != nil {
		fmt.Fprintf(w, "ρ of one period, W(%d)⋯W(%d) = %.4f\n", rec.Iter+rec.Period-1, rec.Iter, *rec.RhoPeriod)
	}
}
