package plot

import (
	"bytes"
	"encoding/xml"
	"html"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// svgTexts returns the text elements of an SVG document, failing t if it
// is not well-formed XML.
func svgTexts(t *testing.T, svg []byte) []string {
	t.Helper()
	var texts []string
	d := xml.NewDecoder(bytes.NewReader(svg))
	in := false
	for {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				return texts
			}
			t.Fatalf("SVG: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			in = tok.Name.Local == "text"
		case xml.CharData:
			if in {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			in = false
		}
	}
}

// TestWriteSVG draws the runs of testdata and checks the figure's panels,
// axes and legend.
func TestWriteSVG(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		files []string
		want  []string
		none  []string // panels no run has points for
	}{
		{"train logs", []string{"local_h3.jsonl", "dp.jsonl"},
			[]string{"local_h3: Local SGD (constant H = 3)", "dp: data parallel (gradients averaged every step)"}, nil},
		{"data parallel", []string{"dp.jsonl"}, []string{"dp: data parallel (gradients averaged every step)"},
			[]string{"Synchronization period H"}},
		{"grid and log", []string{"grid_runs.jsonl", "local_h3.jsonl"},
			[]string{"dp/seed1: Data parallel", "local-qsr/seed1: Local SGD, QSR (H ∝ η⁻²)", "local_h3: Local SGD (constant H = 3)"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var paths []string
			for _, f := range c.files {
				paths = append(paths, filepath.Join("testdata", f))
			}
			runs, err := ReadFiles(paths...)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := WriteSVG(&b, runs); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(bytes.TrimSpace(b.Bytes()), []byte("<?xml")) || !bytes.Contains(b.Bytes(), []byte("<svg")) {
				t.Fatalf("not an SVG document: %.200s", b.String())
			}
			texts := map[string]int{}
			for _, s := range svgTexts(t, b.Bytes()) {
				texts[html.UnescapeString(s)]++
			}
			none := map[string]bool{}
			for _, p := range c.none {
				none[p] = true
			}
			for _, p := range panels {
				title := p.title
				if none[p.title] {
					title += " (none recorded)"
				}
				if texts[title] != 1 || texts[p.y] != 1 {
					t.Errorf("panel %q with y axis %q: texts %v", title, p.y, texts)
				}
			}
			if texts["step"] != 4 {
				t.Errorf("%d x axes named step, want 4", texts["step"])
			}
			for _, w := range c.want {
				if texts[w] != 1 {
					t.Errorf("legend %q appears %d times, want once", w, texts[w])
				}
			}
			// A line and a set of marks for each run in each panel it has
			// points for; the grid, axes and legend draw paths too.
			if n, min := strings.Count(b.String(), "<path"), len(runs); n < min {
				t.Errorf("%d paths, want more than %d", n, min)
			}
		})
	}
}

// TestWriteSVGErrors checks that nothing to draw is an error.
func TestWriteSVGErrors(t *testing.T) {
	t.Parallel()
	if err := WriteSVG(&bytes.Buffer{}, nil); err == nil || err.Error() != "plot: no runs to draw" {
		t.Errorf("no runs: %v", err)
	}
}
