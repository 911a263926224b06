package main

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlotUsage checks flock plot's help and the mistakes it refuses: one
// line on stderr naming the file and line of a bad log.
func TestPlotUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.jsonl", `{"kind":"train","step":1,"loss":2}`+"\n")
	cut := write("cut.jsonl", `{"kind":"train","step":1,"loss":2}`+"\n"+`{"kind":"tr`)
	text := write("notes.jsonl", "step 1: loss 2\n")
	empty := write("empty.jsonl", "")
	missing := filepath.Join(dir, "none.jsonl")
	runCLICases(t, []cliCase{
		{"help", []string{"plot", "--help"}, exitOK, []string{"Usage: flock plot RUN.jsonl... [-o OUT.svg]", "flock train --json", "-o PATH"}, nil, false},
		{"help command", []string{"help", "plot"}, exitOK, []string{"Usage: flock plot"}, nil, false},
		{"listed", []string{"--help"}, exitOK, []string{"plot     draw runs' loss, accuracy, H and bytes sent"}, nil, false},
		{"no logs", []string{"plot"}, exitUsage, nil, []string{"flock plot: no logs to draw (want RUN.jsonl...)"}, false},
		{"unknown flag", []string{"plot", good, "--out", "x.svg"}, exitUsage, nil, []string{"flock plot: flag provided but not defined: -out"}, false},
		{"empty output", []string{"plot", good, "-o", ""}, exitUsage, nil, []string{"flock plot: -o: empty path"}, false},
		{"missing log", []string{"plot", good, missing}, exitFailure, nil, []string{"flock plot: open " + missing + ": no such file"}, false},
		{"cut short", []string{"plot", cut}, exitFailure, nil, []string{"flock plot: " + cut + ":2: not JSON: unexpected end of JSON input", "cut short?"}, false},
		{"not JSON", []string{"plot", good, text}, exitFailure, nil, []string{"flock plot: " + text + ":1: not JSON"}, false},
		{"no records", []string{"plot", empty}, exitFailure, nil, []string{"flock plot: " + empty + ": no records"}, false},
		{"unwritable output", []string{"plot", good, "-o", filepath.Join(missing, "out.svg")}, exitFailure, nil, []string{"flock plot: write " + filepath.Join(missing, "out.svg")}, false},
	})
}

// TestPlotTrain draws two short runs of flock train --json, Local SGD and
// data parallel, and checks the figure's panels and legend; then the same
// figure on standard output.
func TestPlotTrain(t *testing.T) {
	dir := t.TempDir()
	base := tensorBoardArgs(t) // a short run of two workers, with --json
	var logs []string
	for _, s := range []struct{ name, flags string }{
		{"local", "--workers 2"},
		{"dp", "--workers 2 --strategy dp"},
	} {
		args := slices.Clone(base)
		if s.name == "dp" {
			// Data parallel takes no H.
			i := slices.Index(args, "--sync")
			args = slices.Delete(args, i, i+4)
		}
		var stdout, stderr bytes.Buffer
		if code := run(append(args, strings.Fields(s.flags)...), &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: exit status %d: %s", s.name, code, stderr.String())
		}
		p := filepath.Join(dir, s.name+".jsonl")
		if err := os.WriteFile(p, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, p)
	}

	out := filepath.Join(dir, "runs.svg")
	var stdout, stderr bytes.Buffer
	// Flags may follow the logs.
	if code := run([]string{"plot", logs[0], "-o", out, logs[1]}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if got, want := stdout.String(), "flock plot: 2 runs drawn in "+out+"\n"; got != want || stderr.Len() > 0 {
		t.Errorf("stdout %q (want %q), stderr %q", got, want, stderr.String())
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := html.UnescapeString(string(svg))
	for _, w := range []string{"<svg", ">Training loss<", ">Test accuracy<", ">Synchronization period H<", ">Bytes sent per worker<",
		">step<", ">local: Local SGD (constant H = 4)<", ">dp: data parallel (gradients averaged every step)<"} {
		if !strings.Contains(text, w) {
			t.Errorf("SVG does not contain %q", w)
		}
	}

	stdout.Reset()
	if code := run([]string{"plot", "-o", "-", logs[0], logs[1]}, &stdout, &stderr); code != exitOK {
		t.Fatalf("-o -: exit status %d: %s", code, stderr.String())
	}
	if !bytes.Equal(stdout.Bytes(), svg) {
		t.Errorf("-o -: %d bytes on stdout, want the %d of %s", stdout.Len(), len(svg), out)
	}
}
