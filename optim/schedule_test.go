package optim_test

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/safetensors"
)

func TestScheduleFormulas(t *testing.T) {
	t.Parallel()
	// Base 1, warm-up of 10 steps from 0.2, decay over steps 10..110 to 0.1:
	// the decay's midpoint is step 60.
	warm := func(d optim.Decay) optim.Schedule {
		return optim.Schedule{Base: 1, Decay: d, WarmupSteps: 10, WarmupStart: 0.2, TotalSteps: 110, Final: 0.1}
	}
	step := warm(optim.Step)
	step.Milestones = []int{20, 50, 50, 80}
	step.Gamma = 0.5
	type point struct {
		t    int
		want float64
	}
	warmup := []point{{0, 0.2}, {1, 0.28}, {5, 0.6}, {9, 0.92}, {10, 1}}
	tests := []struct {
		name   string
		s      optim.Schedule
		points []point
	}{
		{"constant", warm(optim.Constant), append(warmup, point{60, 1}, point{110, 1}, point{1000, 1})},
		{"cosine", warm(optim.Cosine), append(warmup,
			point{35, 0.1 + 0.9*(1+math.Sqrt2/2)/2}, // a quarter of the way: cos(π/4)
			point{60, 0.55},
			point{85, 0.1 + 0.9*(1-math.Sqrt2/2)/2},
			point{109, 0.1 + 0.9*(1+math.Cos(math.Pi*99/100))/2},
			point{110, 0.1}, point{111, 0.1}, point{1000, 0.1})},
		{"linear", warm(optim.Linear), append(warmup,
			point{35, 0.775}, point{60, 0.55}, point{109, 0.109},
			point{110, 0.1}, point{111, 0.1}, point{1000, 0.1})},
		{"step", step, append(warmup,
			point{19, 1}, point{20, 0.5}, point{49, 0.5}, point{50, 0.125},
			point{79, 0.125}, point{80, 0.0625}, point{1000, 0.0625})},
		{"no warm-up", optim.Schedule{Base: 0.4, Decay: optim.Cosine, TotalSteps: 4, Final: 0},
			[]point{{0, 0.4}, {1, 0.2 * (1 + math.Sqrt2/2)}, {2, 0.2}, {4, 0}, {5, 0}}},
		{"milestone in warm-up", optim.Schedule{Base: 2, Decay: optim.Step, WarmupSteps: 4, WarmupStart: 0.5,
			Milestones: []int{2}, Gamma: 0.1},
			[]point{{0, 1}, {2, 1.5}, {3, 1.75}, {4, 0.2}, {100, 0.2}}},
		{"warm-up from zero", optim.Schedule{Base: 3, Decay: optim.Constant, WarmupSteps: 3},
			[]point{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {7, 3}}},
	}
	for _, tc := range tests {
		if err := tc.s.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", tc.name, err)
		}
		for _, p := range tc.points {
			if got := tc.s.LR(p.t); math.Abs(got-p.want) > 1e-14*max(1, math.Abs(p.want)) {
				t.Errorf("%s: LR(%d) = %.17g, want %.17g", tc.name, p.t, got, p.want)
			}
		}
	}
}

// TestSchedulePure checks that LR depends on nothing but its argument: the
// rates queried backwards, or interleaved with other steps, are the rates
// queried in order.
func TestSchedulePure(t *testing.T) {
	t.Parallel()
	s := optim.Schedule{Base: 0.1, Decay: optim.Cosine, WarmupSteps: 7, WarmupStart: 0.01, TotalSteps: 50, Final: 1e-4}
	var forward []float64
	for step := range 60 {
		forward = append(forward, s.LR(step))
	}
	for step := 59; step >= 0; step-- {
		s.LR(step * 7 % 60)
		if got := s.LR(step); got != forward[step] {
			t.Fatalf("LR(%d) = %v on a later query, %v at first", step, got, forward[step])
		}
	}
}

// scheduleCase is a case of testdata/golden/gen_sched.py: an optim.Schedule's
// settings, the decay by name.
type scheduleCase struct {
	Base        float64 `json:"base"`
	Decay       string  `json:"decay"`
	WarmupSteps int     `json:"warmup_steps"`
	WarmupStart float64 `json:"warmup_start"`
	TotalSteps  int     `json:"total_steps"`
	Final       float64 `json:"final"`
	Milestones  []int   `json:"milestones"`
	Gamma       float64 `json:"gamma"`
}

// TestScheduleGoldenTorch compares the schedules with the rates of
// torch.optim.lr_scheduler: LinearLR warm-ups chained by SequentialLR to
// CosineAnnealingLR or a decaying LinearLR, and MultiStepLR. Torch computes
// them recursively, flock in closed form; they agree to rounding.
func TestScheduleGoldenTorch(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "testdata", "golden", "sched.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := safetensors.LoadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, x := range ts {
			x.Release()
		}
	}()
	decays := map[optim.Decay]bool{}
	for name, raw := range f.Metadata {
		if name == "torch" {
			continue
		}
		var c scheduleCase
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d, err := optim.ParseDecay(c.Decay)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		decays[d] = true
		s := optim.Schedule{
			Base: c.Base, Decay: d, WarmupSteps: c.WarmupSteps, WarmupStart: c.WarmupStart,
			TotalSteps: c.TotalSteps, Final: c.Final, Milestones: c.Milestones, Gamma: c.Gamma,
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lr, ok := ts[name+".lr"]
		if !ok {
			t.Fatalf("%s: no rates", name)
		}
		want := lr.Float64s()
		if len(want) != c.TotalSteps+1 {
			t.Fatalf("%s: %d rates for %d steps", name, len(want), c.TotalSteps)
		}
		for step, w := range want {
			if got := s.LR(step); math.Abs(got-w) > 1e-12*s.Base {
				t.Errorf("%s: LR(%d) = %.17g, torch %.17g", name, step, got, w)
			}
		}
	}
	if len(decays) != 4 {
		t.Errorf("golden cases cover decays %v, want all four", decays)
	}
}

func TestScheduleValidate(t *testing.T) {
	t.Parallel()
	ok := optim.Schedule{Base: 0.1, Decay: optim.Cosine, WarmupSteps: 5, WarmupStart: 0.1, TotalSteps: 100}
	tests := []struct {
		name   string
		modify func(*optim.Schedule)
	}{
		{"negative base", func(s *optim.Schedule) { s.Base = -0.1 }},
		{"NaN base", func(s *optim.Schedule) { s.Base = math.NaN() }},
		{"negative warm-up", func(s *optim.Schedule) { s.WarmupSteps = -1 }},
		{"negative warm-up start", func(s *optim.Schedule) { s.WarmupStart = -0.5 }},
		{"NaN warm-up start", func(s *optim.Schedule) { s.WarmupStart = math.NaN() }},
		{"cosine ends in warm-up", func(s *optim.Schedule) { s.TotalSteps = 5 }},
		{"cosine without total", func(s *optim.Schedule) { s.WarmupSteps, s.TotalSteps = 0, 0 }},
		{"linear ends before warm-up", func(s *optim.Schedule) { s.Decay, s.TotalSteps = optim.Linear, 3 }},
		{"negative final", func(s *optim.Schedule) { s.Final = -1e-3 }},
		{"step without gamma", func(s *optim.Schedule) { s.Decay, s.Milestones = optim.Step, []int{10} }},
		{"step NaN gamma", func(s *optim.Schedule) { s.Decay, s.Milestones, s.Gamma = optim.Step, []int{10}, math.NaN() }},
		{"step unsorted", func(s *optim.Schedule) { s.Decay, s.Milestones, s.Gamma = optim.Step, []int{30, 10}, 0.1 }},
		{"unknown decay", func(s *optim.Schedule) { s.Decay = optim.Decay(9) }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid schedule: %v", err)
	}
	for _, tc := range tests {
		s := ok
		tc.modify(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", tc.name, s)
		}
	}
	valid := []optim.Schedule{
		{Base: 0.1, Decay: optim.Constant},
		{Base: 0.1, Decay: optim.Linear, TotalSteps: 1},
		{Base: 0.1, Decay: optim.Step, Milestones: []int{3, 3, 9}, Gamma: 0.1},
		{Base: 0.1, Decay: optim.Step, Gamma: 2},
		{Base: 0, Decay: optim.Cosine, TotalSteps: 10},
	}
	for _, s := range valid {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", s, err)
		}
	}
}

func TestParseDecay(t *testing.T) {
	t.Parallel()
	var seen []optim.Decay
	for _, name := range []string{"constant", "cosine", "step", "linear"} {
		d, err := optim.ParseDecay(name)
		if err != nil {
			t.Fatalf("ParseDecay(%q): %v", name, err)
		}
		if d.String() != name {
			t.Errorf("ParseDecay(%q).String() = %q", name, d.String())
		}
		if slices.Contains(seen, d) {
			t.Errorf("ParseDecay(%q) = %v, which another name gave too", name, d)
		}
		seen = append(seen, d)
	}
	for _, bad := range []string{"", "Cosine", "exp", "cosine "} {
		if d, err := optim.ParseDecay(bad); err == nil {
			t.Errorf("ParseDecay(%q) = %v, want an error", bad, d)
		}
	}
	if s := optim.Decay(7).String(); s != "Decay(7)" {
		t.Errorf("Decay(7).String() = %q", s)
	}
}
