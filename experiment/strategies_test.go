package experiment

import (
	"slices"
	"strings"
	"testing"
)

// TestStrategyRuns checks the runs of the strategies grid: one per
// strategy and seed in the grid's order, the common flags before the
// strategy's, and the options refused.
func TestStrategyRuns(t *testing.T) {
	t.Parallel()
	o := GridOptions{Model: "cnn", Workers: 2, Epochs: 4, Batch: 64, TrainImages: 512, Seeds: []uint64{1, 2}}
	runs, err := StrategyRuns(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2*len(StrategyGrid) || runs[0].ID != "dp/seed1" || runs[1].ID != "dp/seed2" || runs[1].Seed != 2 {
		t.Fatalf("%d runs, the first %v: want 2 per strategy, dp's first", len(runs), runs[:2])
	}
	const common = "--model cnn --workers 2 --epochs 4 --batch-size 64 --seed 1 --eval-every 1 --log-every 0 --lr 0.05 --train-images 512 "
	for _, r := range runs {
		if r.Seed != 1 {
			continue
		}
		i := slices.IndexFunc(StrategyGrid, func(g GridStrategy) bool { return g.Name == r.Strategy })
		if i < 0 || r.Label != StrategyGrid[i].Label {
			t.Fatalf("run %s: strategy %q, label %q not in the grid", r.ID, r.Strategy, r.Label)
		}
		if want := common + strings.Join(StrategyGrid[i].Args(4), " "); strings.Join(r.Args, " ") != want {
			t.Errorf("run %s: flags %q, want %q", r.ID, strings.Join(r.Args, " "), want)
		}
	}
	if post := runs[2*slices.IndexFunc(StrategyGrid, func(g GridStrategy) bool { return g.Name == "post-local" })]; !strings.HasSuffix(strings.Join(post.Args, " "), "--post-local-switch 1") {
		t.Errorf("post-local switches at %v, want a quarter of 4 epochs", post.Args)
	}

	o.Strategies = []string{"swarm", "dp"}
	runs, err = StrategyRuns(o)
	if err != nil || len(runs) != 4 || runs[0].Strategy != "dp" || runs[2].Strategy != "swarm" {
		t.Errorf("dp and swarm: %v, %v; want their 4 runs in the grid's order", runs, err)
	}
	for _, c := range []struct {
		name string
		edit func(*GridOptions)
		err  string
	}{
		{"model", func(o *GridOptions) { o.Model = "nope" }, `unknown model "nope"`},
		{"one worker", func(o *GridOptions) { o.Workers = 1 }, "want workers ≥ 2"},
		{"no batch", func(o *GridOptions) { o.Batch = 0 }, "batch-size ≥ 1"},
		{"strategy", func(o *GridOptions) { o.Strategies = []string{"dp", "sgd"} }, `strategies "sgd": not in the grid`},
	} {
		bad := o
		c.edit(&bad)
		if _, err := StrategyRuns(bad); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
	for _, q := range QuickStrategies {
		if !InStrategyGrid(q) {
			t.Errorf("quick strategy %s is not in the grid", q)
		}
	}
}
