package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// panel is one of the figure's plots: a curve of each run against the
// step.
type panel struct {
	title, y string
	points   func(Run) []Point
	// scale multiplies the values (to percent, to MiB).
	scale float64
	// steps draws each point (step, H) as a round: H from step−H to step.
	steps bool
}

// panels are the figure's plots, in reading order.
var panels = []panel{
	{title: "Training loss", y: "loss", points: func(r Run) []Point { return r.Loss }, scale: 1},
	{title: "Test accuracy", y: "accuracy (%)", points: func(r Run) []Point { return r.TestAcc }, scale: 100},
	{title: "Synchronization period H", y: "H (steps per round)", points: func(r Run) []Point { return r.H }, scale: 1, steps: true},
	{title: "Bytes sent per worker", y: "MiB", points: func(r Run) []Point { return r.Sent }, scale: 1.0 / (1 << 20)},
}

// Sizes of the figure: each panel, the legend's least width, and the
// margins.
const (
	panelW, panelH = 5 * vg.Inch, 3.5 * vg.Inch
	legendMinW     = 2 * vg.Inch
	margin         = 6
)

// WriteSVG draws runs in four panels against the step — the training
// loss, the test accuracy, the synchronization period H (a step function:
// each round's H over its steps) and the bytes a worker sent — each run a
// line of its own (a colour of plotutil.DarkColors, dashed once they are
// used up), named in a legend to the right, and writes the figure to w as
// SVG. A panel no run has points for says so in its title.
func WriteSVG(w io.Writer, runs []Run) error {
	if len(runs) == 0 {
		return errors.New("plot: no runs to draw")
	}
	plots := [][]*plot.Plot{make([]*plot.Plot, 2), make([]*plot.Plot, 2)}
	for i, pn := range panels {
		p, err := pn.plot(runs)
		if err != nil {
			return fmt.Errorf("plot: %s: %w", pn.title, err)
		}
		plots[i/2][i%2] = p
	}

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.Padding = vg.Points(4)
	for i, r := range runs {
		l, err := plotter.NewLine(plotter.XYs{{}})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.LineStyle = lineStyle(i)
		legend.Add(r.Label(), l)
	}
	legendW := max(legendMinW, legend.Rectangle(draw.Canvas{}).Size().X+vg.Points(2*margin))

	c := vgsvg.New(2*panelW+legendW, 2*panelH)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(2 * margin), PadY: vg.Points(2 * margin),
		PadTop: vg.Points(margin), PadBottom: vg.Points(margin), PadLeft: vg.Points(margin), PadRight: vg.Points(margin)}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, -legendW, 0, 0))
	for j := range plots {
		for i, p := range plots[j] {
			p.Draw(canvases[j][i])
		}
	}
	legend.Draw(draw.Crop(dc, 2*panelW+vg.Points(margin), 0, 0, -vg.Points(4*margin)))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plot: write SVG: %w", err)
	}
	return nil
}

// plot makes the panel's plot of runs.
func (pn panel) plot(runs []Run) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.X.Label.Text, p.Y.Label.Text = "step", pn.y
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, r := range runs {
		pts := slices.Clone(pn.points(r))
		// A resumed run logs again the steps after its checkpoint.
		slices.SortStableFunc(pts, func(a, b Point) int {
			switch {
			case a.Step < b.Step:
				return -1
			case a.Step > b.Step:
				return 1
			}
			return 0
		})
		var line, marks plotter.XYs
		for _, pt := range pts {
			v := pt.Value * pn.scale
			if math.IsInf(v, 0) || math.IsNaN(v) {
				continue
			}
			if pn.steps {
				line = append(line, plotter.XY{X: pt.Step - pt.Value, Y: v})
			}
			line = append(line, plotter.XY{X: pt.Step, Y: v})
			marks = append(marks, plotter.XY{X: pt.Step, Y: v})
		}
		if len(marks) == 0 {
			continue
		}
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, err
		}
		l.LineStyle = lineStyle(i)
		s, err := plotter.NewScatter(marks)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: l.Color, Shape: plotutil.Shape(i), Radius: vg.Points(2.5)}
		if len(marks) > 40 {
			s.GlyphStyle.Radius = 0 // a dense curve: the line alone
		}
		p.Add(l, s)
		drawn++
	}
	if drawn == 0 {
		p.Title.Text += " (none recorded)"
	}
	return p, nil
}

// lineStyle is the line of the i-th run: a colour of plotutil.DarkColors,
// then the same colours again with dashes.
func lineStyle(i int) draw.LineStyle {
	n := len(plotutil.DarkColors)
	return draw.LineStyle{Color: plotutil.DarkColors[i%n], Width: vg.Points(1.5), Dashes: plotutil.Dashes(i / n)}
}
