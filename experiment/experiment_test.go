package experiment

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/flockml/flock/netmodel"
	"github.com/flockml/flock/train"
)

// TestProjectRuns checks the message each pattern costs, from a run's
// bytes and synchronizations, against values worked out by hand.
func TestProjectRuns(t *testing.T) {
	t.Parallel()
	net := netmodel.Network{Name: "test", Latency: 1e-3, Bandwidth: 1e6, AllReduce: "ring"}
	base := Record{Workers: 8, Jobs: 1, Cores: 2, Params: 1000, Steps: 100, Wall: 14, EvalTime: 2}
	withComm := func(pattern netmodel.Pattern, topology string, sent, syncs int64) Record {
		r := base
		r.Pattern, r.Topology, r.Comm = string(pattern), topology, train.CommStats{Sent: sent, Syncs: syncs, Blocked: 4}
		return r
	}
	runs := Project([]Record{
		// 50 all-reduces of n = 8000 B on 8 workers send 2·7/8 · n each.
		withComm(netmodel.AllReduce, "", 50*14000, 50),
		withComm(netmodel.Neighbors, "exp", 0, 100),
		withComm(netmodel.Neighbors, "one-peer-exp", 0, 100),
		withComm(netmodel.Neighbors, "ring", 0, 100),
		withComm(netmodel.Pairwise, "full", 30*4000, 30),
	}, net, net, 16, 0)
	// (14 − 2 − 4) s over 100 steps, 2 cores shared by 8 workers: 20 ms.
	const step = 0.02
	for i, want := range []struct {
		pattern netmodel.Pattern
		n       float64
		degree  int
		comm    float64
	}{
		{netmodel.AllReduce, 8000, 0, 50 * (0.030 + 2*15.0/16*0.008)},
		{netmodel.Neighbors, 4000, 4, 100 * 4 * 0.005},
		{netmodel.Neighbors, 4000, 1, 100 * 0.005},
		{netmodel.Neighbors, 4000, 2, 100 * 2 * 0.005},
		{netmodel.Pairwise, 4000, 0, 30 * 0.005},
	} {
		p := runs[i].Projected
		if p.Pattern != want.pattern || p.MessageBytes != want.n || p.Degree != want.degree || math.Abs(p.Comm-want.comm) > 1e-9 ||
			math.Abs(p.StepCompute-step) > 1e-12 || math.Abs(p.Time-(100*step+want.comm)) > 1e-9 {
			t.Errorf("run %d (%s %s): %+v; want %s, n = %v B, degree %d, comm %v s, step %v s", i, runs[i].Kind, runs[i].Topology, p, want.pattern, want.n, want.degree, want.comm, step)
		}
	}
}

// TestProjectTwoLevels: a two-level run's world level goes on the
// network of the nodes and its inner level, all-reduces among a node's
// workers, on the node's network.
func TestProjectTwoLevels(t *testing.T) {
	t.Parallel()
	net := netmodel.Network{Name: "test", Latency: 1e-3, Bandwidth: 1e6, AllReduce: "ring"}
	node := netmodel.Network{Name: "node", Latency: 1e-4, Bandwidth: 1e8, AllReduce: "ring"}
	// 50 world all-reduces of n = 8000 B on 8 workers (2·7/8 · n each),
	// 100 all-reduces of 8000 B inside nodes of 4 (2·3/4 · n each).
	r := Record{Workers: 8, Jobs: 1, Cores: 2, Params: 2000, Steps: 100, Wall: 14, EvalTime: 2, Pattern: string(netmodel.AllReduce), NodeSize: 4,
		Comm: train.CommStats{Sent: 50*14000 + 100*12000, Syncs: 50, InnerSent: 100 * 12000, InnerSyncs: 100, Blocked: 4}}
	p := Project([]Record{r}, net, node, 16, 0)[0].Projected
	outer := 50 * (0.030 + 2*15.0/16*0.008)
	inner := 100 * (6e-4 + 1.5*8000/1e8)
	if p.MessageBytes != 8000 || math.Abs(p.InnerComm-inner) > 1e-9 || math.Abs(p.Comm-(outer+inner)) > 1e-9 ||
		math.Abs(p.Time-(100*0.02+outer+inner)) > 1e-9 || p.NodeNetwork == nil || p.NodeNetwork.Name != "node" {
		t.Errorf("%+v; want n = 8000 B, inner %v s of comm %v s on the node network", p, inner, outer+inner)
	}
}

// TestGridProgress checks the progress lines: the runs found done, then a
// line per finished run with the counts and the time left.
func TestGridProgress(t *testing.T) {
	t.Parallel()
	for _, terminal := range []bool{false, true} {
		var b bytes.Buffer
		p := NewProgress(&b, terminal)
		p.start(4, 1, 1)
		r := Run{ID: "dp/seed2"}
		p.begin(r)
		if terminal && !strings.Contains(b.String(), "runs 1/4 done, 1 running, ETA - — dp/seed2") {
			t.Errorf("terminal: no state line while dp/seed2 runs: %q", b.String())
		}
		p.end(r, &Record{TestAcc: 0.875, Comm: train.CommStats{Sent: 3 << 20}})
		p.finish()
		out := b.String()
		for _, want := range []string{"1 of 4 runs already done", "dp/seed2                   test acc  87.50%  sent 3.0 MiB", "runs 2/4 done, 0 running, ETA ", "runs 2/4 done\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("terminal %v: no %q in\n%q", terminal, want, out)
			}
		}
	}
}

// TestFigureLegendFits widens the legend's column for a label longer than
// its default width holds, so that no label is cut at the figure's edge.
func TestFigureLegendFits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	width := func(label string) float64 {
		t.Helper()
		f := figure{title: "t", x: "x", y: "y", series: []series{{label: label, xys: plotter.XYs{{X: 1, Y: 2}}}}}
		path := filepath.Join(dir, "f.svg")
		if err := f.save(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`<svg width="([0-9.]+)pt"`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no width in %.200s", b)
		}
		w, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	short := width("Data parallel")
	if want := 72 * (7 + 2.6); math.Abs(short-want) > 0.5 {
		t.Errorf("short label: width %v pt, want the default %v", short, want)
	}
	long := strings.Repeat("JointSpar-LARS, balanced draws ", 3)
	sty := plot.NewLegend().TextStyle
	sty.Font.Size = vg.Points(10)
	need := float64(sty.Width(long))
	if got := width(long); got < 72*7+need {
		t.Errorf("long label: width %v pt, want at least the plot's %v and the label's %v", got, 72*7, need)
	}
}
