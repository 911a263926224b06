package experiment

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/flockml/flock/gossip"
	"github.com/flockml/flock/netmodel"
)

// Projection is what a run would cost on P nodes of a network.
type Projection struct {
	Network netmodel.Network `json:"network"`
	Nodes   int              `json:"nodes"`
	Pattern netmodel.Pattern `json:"pattern"`
	// MessageBytes is n, what one synchronization reduces or sends;
	// Degree the out-degree of a neighbour exchange on P nodes.
	MessageBytes float64 `json:"message_bytes"`
	Degree       int     `json:"degree,omitempty"`
	// StepCompute is the compute time of one step; Time the projected
	// wall-clock time of the run, Comm the part of it communicating.
	StepCompute float64 `json:"step_compute_s"`
	Time        float64 `json:"time_s"`
	Comm        float64 `json:"comm_s"`
	// For a two-level run, InnerComm is the part of Comm its inner level
	// takes, all-reduces among a node's workers on NodeNetwork; the outer
	// level goes on Network.
	NodeNetwork *netmodel.Network `json:"node_network,omitempty"`
	InnerComm   float64           `json:"inner_comm_s,omitempty"`
}

// ProjectedRun is a run with its Projection: a line of report.jsonl.
type ProjectedRun struct {
	Record
	Projected Projection `json:"projected"`
}

// Project projects each run onto p nodes of net, the inner level of a
// two-level run onto its node's workers joined by node; stepTime, when
// positive, replaces the measured compute time of a step.
func Project(recs []Record, net, node netmodel.Network, p int, stepTime float64) []ProjectedRun {
	out := make([]ProjectedRun, len(recs))
	for i, r := range recs {
		w := netmodel.Workload{Steps: r.Steps, Syncs: r.Comm.Syncs, StepCompute: stepTime}
		if stepTime == 0 && r.Steps > 0 {
			// The workers shared the cores: a worker alone would have
			// taken this share of the time.
			share := math.Min(1, float64(r.Cores)/float64(r.Workers*max(1, r.Jobs)))
			w.StepCompute = math.Max(0, r.Wall-r.EvalTime-r.Comm.Blocked) / float64(r.Steps) * share
		}
		perSync := 0.0
		if r.Comm.Syncs > 0 {
			perSync = float64(r.Comm.Sent-r.Comm.InnerSent) / float64(r.Comm.Syncs)
		}
		switch netmodel.Pattern(r.Pattern) {
		case netmodel.Neighbors:
			w.Pattern, w.Bytes = netmodel.Neighbors, 4*float64(r.Params)
			if top, err := gossip.New(gossip.Spec{Kind: r.Topology, N: p, Seed: r.Seed}); err == nil {
				_, nb := top.Out(0, 0)
				w.Degree = len(nb)
			}
		case netmodel.Pairwise:
			w.Pattern, w.Bytes = netmodel.Pairwise, perSync
		default:
			// A ring all-reduce of n bytes sends 2(K−1)/K · n from each
			// of the run's K workers (JointSpar's balanced draws, sent
			// point to point, count as the all-reduce sending as much).
			w.Pattern = netmodel.AllReduce
			w.Bytes = perSync / (2 * float64(r.Workers-1) / float64(r.Workers))
		}
		total, comm := net.Project(p, w)
		proj := Projection{Network: net, Nodes: p, Pattern: w.Pattern, MessageBytes: w.Bytes, Degree: w.Degree, StepCompute: w.StepCompute}
		if n := r.NodeSize; r.Comm.InnerSyncs > 0 && n > 1 {
			bytes := float64(r.Comm.InnerSent) / float64(r.Comm.InnerSyncs) / (2 * float64(n-1) / float64(n))
			proj.InnerComm = float64(r.Comm.InnerSyncs) * node.SyncTime(n, netmodel.Workload{Pattern: netmodel.AllReduce, Bytes: bytes})
			proj.NodeNetwork = &node
			total += proj.InnerComm
			comm += proj.InnerComm
		}
		proj.Time, proj.Comm = total, comm
		out[i] = ProjectedRun{r, proj}
	}
	return out
}

// strategySummary is a strategy's runs over the seeds, in grid order.
type strategySummary struct {
	name, label string
	runs        []ProjectedRun
}

func summarize(runs []ProjectedRun) []strategySummary {
	var out []strategySummary
	for _, r := range runs {
		if len(out) == 0 || out[len(out)-1].name != r.Strategy {
			out = append(out, strategySummary{name: r.Strategy, label: r.Label})
		}
		out[len(out)-1].runs = append(out[len(out)-1].runs, r)
	}
	return out
}

// meanStd returns the mean of f over s's runs and their standard deviation
// (n − 1 in the denominator; 0 for one run).
func (s strategySummary) meanStd(f func(ProjectedRun) float64) (mean, std float64) {
	xs := make([]float64, len(s.runs))
	for i, r := range s.runs {
		xs[i] = f(r)
	}
	if len(xs) == 1 {
		return xs[0], 0
	}
	return stat.MeanStdDev(xs, nil)
}

func testAccPct(r ProjectedRun) float64 { return 100 * r.TestAcc }
func sentMiB(r ProjectedRun) float64    { return float64(r.Comm.Sent) / (1 << 20) }

// WriteReport writes report.jsonl, report.md and the figures
// into dir.
func WriteReport(dir, command string, net netmodel.Network, p int, runs []ProjectedRun) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w", err)
	}
	var jl strings.Builder
	enc := json.NewEncoder(&jl)
	for _, r := range runs {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("%w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "report.jsonl"), []byte(jl.String()), 0o644); err != nil {
		return fmt.Errorf("%w", err)
	}
	sums := summarize(runs)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(experimentMarkdown(command, net, p, runs, sums)), 0o644); err != nil {
		return fmt.Errorf("%w", err)
	}
	netName := fmt.Sprintf("%d nodes, %s", p, net.Name)
	figures := []struct {
		file string
		fig  figure
	}{
		{"acc_bytes.svg", pointFigure(sums, "Test accuracy against bytes sent", "bytes sent per worker (MiB, log scale)", sentMiB)},
		{"acc_time.svg", pointFigure(sums, "Test accuracy against projected time ("+netName+")", "projected wall-clock time (s, log scale)",
			func(r ProjectedRun) float64 { return r.Projected.Time })},
		{"curves.svg", curveFigure(sums)},
		{"h.svg", hFigure(sums)},
	}
	for _, f := range figures {
		if len(f.fig.series) == 0 {
			continue
		}
		if err := f.fig.save(filepath.Join(dir, f.file)); err != nil {
			return fmt.Errorf("figure %s: %w", f.file, err)
		}
	}
	return nil
}

func experimentMarkdown(command string, net netmodel.Network, p int, runs []ProjectedRun, sums []strategySummary) string {
	var b strings.Builder
	r0 := runs[0]
	fmt.Fprintf(&b, "# Strategies: accuracy against communication\n\nMade by (from the repository root):\n\n```\n%s\n```\n\n", command)
	fmt.Fprintf(&b, "Fashion-MNIST, %s (%d parameters), %d in-process workers, %d epoch(s) of %d steps; mean ± std over the seeds (the runs column). "+
		"Bytes and synchronizations are those of worker 0. Projected time: the run on %d nodes of %s (α = %g s, β = %g B/s, %s all-reduce), "+
		"each step taking the measured compute time of one worker with this machine to itself (see `flock experiment strategies --help`); "+
		"nothing overlaps.\n\n",
		r0.Model, r0.Params, r0.Workers, r0.Epochs, r0.Steps/max(1, r0.Epochs), p, net.Name, net.Latency, net.Bandwidth, net.AllReduce)
	b.WriteString("| strategy | runs | test accuracy (%) | sent per worker (MiB) | synchronizations | compute per step (ms) | projected time (s) | of it communicating (s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	pm := func(s strategySummary, f func(ProjectedRun) float64, prec int) string {
		m, sd := s.meanStd(f)
		return fmt.Sprintf("%.*f ± %.*f", prec, m, prec, sd)
	}
	for _, s := range sums {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", s.label, len(s.runs),
			pm(s, testAccPct, 2), pm(s, sentMiB, 1),
			pm(s, func(r ProjectedRun) float64 { return float64(r.Comm.Syncs) }, 0),
			pm(s, func(r ProjectedRun) float64 { return 1e3 * r.Projected.StepCompute }, 1),
			pm(s, func(r ProjectedRun) float64 { return r.Projected.Time }, 2),
			pm(s, func(r ProjectedRun) float64 { return r.Projected.Comm }, 2))
	}
	b.WriteString("\n![Test accuracy against bytes sent](acc_bytes.svg)\n\n![Test accuracy against projected time](acc_time.svg)\n\n" +
		"![Test accuracy by epoch](curves.svg)\n\n![H over training](h.svg)\n\n" +
		"Every run, with its flags and Projection: `report.jsonl`; as measured: `runs.jsonl`.\n")
	return b.String()
}

// series is one strategy's line or points in a figure; yerr, when set, are
// the points' standard deviations.
type series struct {
	label string
	xys   plotter.XYs
	yerr  []float64
}

// figure is a plot with its legend drawn to its right.
type figure struct {
	title, x, y       string
	logX, logY, lines bool
	series            []series
}

// pointFigure places each strategy at the mean of x and of the test
// accuracy over its seeds, with the accuracy's standard deviation.
func pointFigure(sums []strategySummary, title, xLabel string, x func(ProjectedRun) float64) figure {
	f := figure{title: title, x: xLabel, y: "test accuracy (%)", logX: true}
	for _, s := range sums {
		mx, _ := s.meanStd(x)
		my, sd := s.meanStd(testAccPct)
		if mx <= 0 {
			continue // nothing to place on a log scale
		}
		f.series = append(f.series, series{label: s.label, xys: plotter.XYs{{X: mx, Y: my}}, yerr: []float64{sd}})
	}
	return f
}

// curveFigure is each strategy's test accuracy after each epoch, the mean
// over its seeds.
func curveFigure(sums []strategySummary) figure {
	f := figure{title: "Test accuracy by epoch (mean over seeds)", x: "epoch", y: "test accuracy (%)", lines: true}
	for _, s := range sums {
		var xys plotter.XYs
		for i := range s.runs[0].Curve {
			m, _ := s.meanStd(func(r ProjectedRun) float64 {
				if i < len(r.Curve) {
					return 100 * r.Curve[i].Acc
				}
				return math.NaN()
			})
			xys = append(xys, plotter.XY{X: float64(s.runs[0].Curve[i].Epoch), Y: m})
		}
		f.series = append(f.series, series{label: s.label, xys: xys})
	}
	return f
}

// hFigure is the length H of each round against the step that closes it,
// for the local-update strategies (first seed).
func hFigure(sums []strategySummary) figure {
	f := figure{title: "Synchronization period H over training (first seed)", x: "step", y: "H (steps per round, log scale)", lines: true, logY: true}
	for _, s := range sums {
		r := s.runs[0]
		if netmodel.Pattern(r.Pattern) != netmodel.AllReduce || len(r.H) == 0 {
			continue
		}
		var xys plotter.XYs
		for _, h := range r.H {
			// A step function: H holds from the round's start to its end.
			xys = append(xys, plotter.XY{X: float64(h.Step - h.H), Y: float64(h.H)}, plotter.XY{X: float64(h.Step), Y: float64(h.H)})
		}
		f.series = append(f.series, series{label: s.label, xys: xys})
	}
	return f
}

// palette holds ten colours that stay apart on screen and paper (the
// Tableau 10 of matplotlib), and glyphs the marks of each round of them.
var (
	palette = []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
		color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
		color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	}
	glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}}
)

// logTicks marks a log axis at 1, 2, …, 9 × 10ᵏ, labelling 1, 2 and 5 ×
// 10ᵏ, so that a range of less than a decade still has labels.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
			ts = append(ts, t)
		}
	}
	labelled := 0
	for _, t := range ts {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 2 {
		// Less than a decade between 1, 2 and 5: label every tick.
		for i := range ts {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// pointErrors are points with symmetric y errors, for plotter.YErrorBars.
type pointErrors struct {
	plotter.XYs
	err []float64
}

func (p pointErrors) YError(i int) (float64, float64) { return p.err[i], p.err[i] }

// save draws f as an SVG file at path: 7 × 4.5 inches of plot and a
// column of legend to its right, 2.6 inches wide or as its labels need.
func (f figure) save(path string) error {
	p := plot.New()
	p.Title.Text = f.title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text, p.Y.Label.Text = f.x, f.y
	p.Add(plotter.NewGrid())
	if f.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	if f.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.Padding = vg.Points(3)
	for i, s := range f.series {
		c, shape := palette[i%len(palette)], glyphs[i/len(palette)%len(glyphs)]
		if f.lines {
			l, pts, err := plotter.NewLinePoints(s.xys)
			if err != nil {
				return err
			}
			l.Color, l.Dashes, l.Width = c, plotutil.Dashes(i/len(palette)), vg.Points(1.5)
			pts.Color, pts.Shape = c, shape
			if len(s.xys) > 30 {
				pts.Radius = 0
			}
			p.Add(l, pts)
			legend.Add(s.label, l, pts)
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return err
		}
		sc.Color, sc.Shape, sc.Radius = c, shape, vg.Points(4)
		p.Add(sc)
		if s.yerr != nil {
			eb, err := plotter.NewYErrorBars(pointErrors{s.xys, s.yerr})
			if err != nil {
				return err
			}
			eb.Color = c
			p.Add(eb)
		}
		legend.Add(s.label, sc)
	}
	if f.logX {
		// Some room either side of the points on the log axis.
		p.X.Min, p.X.Max = p.X.Min/1.5, p.X.Max*1.5
	}
	if f.logY {
		p.Y.Min, p.Y.Max = p.Y.Min/1.2, p.Y.Max*1.2
	}
	// The legend's column is as wide as its longest label needs.
	const plotW, h = 7 * vg.Inch, 4.5 * vg.Inch
	legendW := max(2.6*vg.Inch, legend.Rectangle(draw.Canvas{}).Size().X+vg.Points(12))
	c := vgsvg.New(plotW+legendW, h)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	p.Draw(draw.Crop(dc, vg.Points(4), -legendW, vg.Points(4), -vg.Points(8)))
	ldc := draw.Crop(dc, plotW+vg.Points(6), 0, 0, -vg.Points(30))
	legend.Draw(ldc)
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
