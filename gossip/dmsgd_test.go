package gossip_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/gossip"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// bands returns n noisy h×w one-channel images in 4 classes; class k is
// bright in a horizontal band of rows that depends on k.
func bands(n, h, w int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &dataset.Images{N: n, H: h, W: w, C: 1, Pixels: make([]uint8, n*h*w), Labels: make([]int32, n), Classes: []string{"a", "b", "c", "d"}}
	for i := range n {
		k := r.IntN(4)
		m.Labels[i] = int32(k)
		img := m.Image(i)
		for p := range img {
			v := r.IntN(100)
			if row := p / w; row*4/h == k {
				v += 120
			}
			img[p] = uint8(v)
		}
	}
	return m
}

// smallConfig trains the MLP for 3 epochs of 4 steps on 96 images, batch
// 24/k per worker, with momentum SGD.
func smallConfig(k int) train.Config {
	cfg := train.DefaultConfig()
	cfg.Model = "mlp"
	cfg.Epochs = 3
	cfg.BatchSize = 24 / k
	cfg.LR = 0.05
	cfg.WarmupEpochs = 0.5
	cfg.LogEvery = 1
	return cfg
}

// snap is a worker's parameters around one step's AfterStep.
type snap struct {
	step      int
	k         int  // mixings before the step's AfterStep
	mixed     bool // whether it mixed
	pre, post map[string][]float32
}

// dmWatch records DmSGD's steps; it keeps every method of DmSGD.
type dmWatch struct {
	*gossip.DmSGD
	snaps []snap
}

func (w *dmWatch) AfterStep(s *train.StepContext) error {
	pre, k := nntest.Values(s.Params), w.Mixings()
	if err := w.DmSGD.AfterStep(s); err != nil {
		return err
	}
	w.snaps = append(w.snaps, snap{s.Step, k, w.Mixings() > k, pre, nntest.Values(s.Params)})
	return nil
}

func (w *dmWatch) snapshots() []snap { return w.snaps }

// stepWatch records another strategy's parameters after each step.
type stepWatch struct {
	train.Strategy
	snaps []snap
}

func (w *stepWatch) AfterStep(s *train.StepContext) error {
	if err := w.Strategy.AfterStep(s); err != nil {
		return err
	}
	w.snaps = append(w.snaps, snap{step: s.Step, post: nntest.Values(s.Params)})
	return nil
}

func (w *stepWatch) snapshots() []snap { return w.snaps }

func (w *stepWatch) CommStats() train.CommStats { return w.Strategy.(train.CommReporter).CommStats() }

func (w *stepWatch) Close() {
	if c, ok := w.Strategy.(interface{ Close() }); ok {
		c.Close()
	}
}

func dmsgd(topo gossip.Topology, j int) func(dist.Comm) train.Strategy {
	return func(c dist.Comm) train.Strategy {
		d, err := gossip.NewDmSGD(c, gossip.DmSGDOptions{Topology: topo, LocalSteps: j})
		if err != nil {
			panic(err)
		}
		return &dmWatch{DmSGD: d}
	}
}

func dataParallel(c dist.Comm) train.Strategy {
	return &stepWatch{Strategy: train.NewDataParallel(c, train.DataParallelOptions{})}
}

// run is one worker's outcome.
type run struct {
	snaps   []snap
	records []train.Record
	final   map[string][]float32
	stats   train.CommStats
}

// runK trains cfg on the workers of comms (in-process ones when nil, k of
// them) with the strategies mk makes; ranks other than 0 start from
// perturbed weights, which Setup must replace by rank 0's. With stop > 0
// the workers stop after stop steps and write a checkpoint set at ckpt,
// and new in-process workers resume from it.
func runK(t *testing.T, cfg train.Config, data *dataset.Images, k int, comms []dist.Comm, mk func(dist.Comm) train.Strategy, stop int, ckpt string) []run {
	t.Helper()
	out := make([]run, k)
	errs := make([]error, k)
	phase := func(comms []dist.Comm, resume bool, until int) {
		var wg sync.WaitGroup
		for r := range k {
			wg.Go(func() {
				o := &out[r]
				s := mk(comms[r])
				defer s.(interface{ Close() }).Close()
				opts := train.Options{Strategy: s, Rank: r, World: k, OnRecord: func(rec train.Record) { o.records = append(o.records, rec) }}
				if ckpt != "" {
					opts.CheckpointComm, opts.CheckpointPath = comms[r], ckpt
				}
				tr, err := train.New(cfg, data, nil, opts)
				if err != nil {
					errs[r] = err
					comms[r].Close()
					return
				}
				defer tr.Close()
				if resume {
					if errs[r] = tr.LoadCheckpoint(ckpt); errs[r] != nil {
						comms[r].Close()
						return
					}
				} else if r > 0 {
					g := tensor.NewGenerator(uint64(50 + r))
					for _, p := range tr.Model().NamedParameters() {
						noise := g.Normal(p.Param.Value.Shape(), 0, 0.1)
						p.Param.Value.AddInPlace(noise)
						noise.Release()
					}
				}
				if _, errs[r] = tr.RunUntil(context.Background(), until); errs[r] != nil {
					comms[r].Close()
					return
				}
				if until < tr.TotalSteps() {
					errs[r] = tr.SaveCheckpoint(ckpt)
				}
				o.snaps = append(o.snaps, s.(interface{ snapshots() []snap }).snapshots()...)
				o.final = nntest.Values(tr.Model().NamedParameters())
				o.stats = s.(train.CommReporter).CommStats()
			})
		}
		wg.Wait()
		for _, c := range comms {
			c.Close()
		}
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	if comms == nil {
		comms = dist.NewLocal(k)
	}
	if stop > 0 {
		phase(comms, false, stop)
		phase(dist.NewLocal(k), true, math.MaxInt)
	} else {
		phase(comms, false, math.MaxInt)
	}
	return out
}

// TestDmSGDFullIsDataParallel checks that DmSGD over the fully connected
// graph (W = 11ᵀ/n) takes data-parallel SGD's steps, step for step,
// without momentum as DmSGD's documentation states and with it (the momenta's
// mean follows SGD's recursion on the mean gradient), and that over a
// ring it does not. -short runs K = 2 with momentum and K = 4 without.
func TestDmSGDFullIsDataParallel(t *testing.T) {
	data := bands(96, 8, 8, 1)
	for _, k := range []int{2, 4} {
		for _, momentum := range []float64{0, 0.9} {
			if testing.Short() && (k == 2) == (momentum == 0) {
				continue
			}
			t.Run(fmt.Sprintf("K=%d/momentum=%g", k, momentum), func(t *testing.T) {
				cfg := smallConfig(k)
				cfg.Momentum, cfg.Nesterov, cfg.WeightDecay = momentum, false, 0
				dm := runK(t, cfg, data, k, nil, dmsgd(gossip.Full(k), 1), 0, "")
				dp := runK(t, cfg, data, k, nil, dataParallel, 0, "")
				if len(dm[0].snaps) != 12 || len(dp[0].snaps) != 12 {
					t.Fatalf("%d and %d steps, want 12", len(dm[0].snaps), len(dp[0].snaps))
				}
				for i := range dp[0].snaps {
					for r := range k {
						if d := nntest.MaxDiff(dp[0].snaps[i].post, dm[r].snaps[i].post); d > 2e-6 {
							t.Fatalf("step %d: rank %d of DmSGD differs from data parallel by %.3g", i, r, d)
						}
					}
				}
				if k == 4 {
					ring := runK(t, cfg, data, k, nil, dmsgd(gossip.Ring(k), 1), 0, "")
					if d := nntest.MaxDiff(dp[0].final, ring[0].final); d < 1e-5 {
						t.Errorf("DmSGD over a ring of 4 ends within %.3g of data parallel", d)
					}
				}
			})
		}
	}
}

// TestDmSGDMixing checks every step of three runs against the mixing
// matrices: a mixing sets each worker's parameters to row i of W(k)
// times the workers' parameters (k counting the mixings), keeping their
// average; the J − 1 steps in between leave them alone. It also checks
// each mixing's consensus distance against the one computed here. -short
// leaves out the mesh.
func TestDmSGDMixing(t *testing.T) {
	data := bands(96, 8, 8, 2)
	for _, tt := range []struct {
		topo gossip.Topology
		j    int
	}{
		{gossip.Exponential(4), 1},
		{gossip.OnePeerExponential(4), 2},
		{gossip.Mesh(3), 3},
	} {
		if testing.Short() && tt.j == 3 {
			continue
		}
		t.Run(fmt.Sprintf("%s/J=%d", tt.topo, tt.j), func(t *testing.T) {
			k := tt.topo.Nodes()
			cfg := smallConfig(4)
			cfg.BatchSize = 8
			runs := runK(t, cfg, data, k, nil, dmsgd(tt.topo, tt.j), 0, "")
			var want []float64
			mixings := 0
			for i, s := range runs[0].snaps {
				if s.mixed != ((s.step+1)%tt.j == 0) || s.k != mixings {
					t.Fatalf("step %d: mixed %v as mixing %d, want %v as mixing %d", s.step, s.mixed, s.k, !s.mixed, mixings)
				}
				if !s.mixed {
					for r := range k {
						if !nntest.Equal(runs[r].snaps[i].pre, runs[r].snaps[i].post) {
							t.Fatalf("step %d: rank %d's parameters changed without a mixing", s.step, r)
						}
					}
					continue
				}
				w := gossip.Matrix(tt.topo, s.k)
				pre, post := make([][]float32, k), make([][]float32, k)
				for name := range s.pre {
					for r := range k {
						pre[r], post[r] = runs[r].snaps[i].pre[name], runs[r].snaps[i].post[name]
					}
					for e := range s.pre[name] {
						var before, after float64
						for r := range k {
							mixed := 0.0
							for j := range k {
								mixed += w.At(r, j) * float64(pre[j][e])
							}
							got := float64(post[r][e])
							if math.Abs(got-mixed) > 1e-6*(1+math.Abs(mixed)) {
								t.Fatalf("step %d: rank %d %s[%d] = %v, want (W(%d)·x)_%d = %v", s.step, r, name, e, got, s.k, r, mixed)
							}
							before += float64(pre[r][e])
							after += got
						}
						if math.Abs(after-before) > 1e-6*(1+math.Abs(before)) {
							t.Fatalf("step %d: %s[%d]: mixing moved the workers' sum from %v to %v", s.step, name, e, before, after)
						}
					}
				}
				want = append(want, consensus(runs, i))
				mixings++
			}
			var got []float64
			for _, rec := range runs[0].records {
				if rec.Kind == train.KindSync {
					got = append(got, rec.Comm.Consensus)
				}
			}
			if len(got) != len(want) || int(runs[0].stats.Syncs) != len(want) {
				t.Fatalf("%d sync records and %d syncs counted for %d mixings", len(got), runs[0].stats.Syncs, len(want))
			}
			t.Logf("consensus distances %.4g, computed here %.4g", got, want)
			// The MLP's 83,460 parameters are measured on a sample of 8192.
			for i := range want {
				if math.Abs(got[i]-want[i]) > 0.1*want[i] || want[i] == 0 {
					t.Errorf("mixing %d: consensus distance %.4g, computed here %.4g", i, got[i], want[i])
				}
			}
		})
	}
}

// consensus returns mean_r ‖x_r − x̄‖/‖x̄‖ of the parameters entering the
// mixing of step i.
func consensus(runs []run, i int) float64 {
	k := len(runs)
	d2 := make([]float64, k)
	var n2 float64
	for name, x := range runs[0].snaps[i].pre {
		for e := range x {
			bar := 0.0
			for _, o := range runs {
				bar += float64(o.snaps[i].pre[name][e]) / float64(k)
			}
			n2 += bar * bar
			for r, o := range runs {
				v := float64(o.snaps[i].pre[name][e]) - bar
				d2[r] += v * v
			}
		}
	}
	mean := 0.0
	for _, d := range d2 {
		mean += math.Sqrt(d/n2) / float64(k)
	}
	return mean
}

// TestDmSGDTransports checks that DmSGD computes bit-identical parameters
// in process, over TCP, and in process over Comms that claim a device of
// their own (as NCCL's claim their GPU), where its buffers live on that
// device and the parameters stay off it.
func TestDmSGDTransports(t *testing.T) {
	data := bands(96, 8, 8, 3)
	for _, topo := range []gossip.Topology{gossip.Exponential(2), gossip.OnePeerExponential(4)} {
		t.Run(topo.String(), func(t *testing.T) {
			k := topo.Nodes()
			cfg := smallConfig(k)
			want := runK(t, cfg, data, k, nil, dmsgd(topo, 1), 0, "")
			got := runK(t, cfg, data, k, commtest.Loopback(t, k, false), dmsgd(topo, 1), 0, "")
			for r := range k {
				if !nntest.Equal(want[r].final, got[r].final) {
					t.Errorf("rank %d: parameters over TCP differ from the in-process run's by %.3g", r, nntest.MaxDiff(want[r].final, got[r].final))
				}
			}
			got = runK(t, cfg, data, k, commtest.OnDevice(dist.NewLocal(k), cpu.New()), dmsgd(topo, 1), 0, "")
			for r := range k {
				if !nntest.Equal(want[r].final, got[r].final) {
					t.Errorf("rank %d: parameters over a Comm on a second CPU differ from the in-process run's by %.3g", r, nntest.MaxDiff(want[r].final, got[r].final))
				}
			}
			if k == 4 && nntest.Equal(want[0].final, want[1].final) {
				t.Errorf("ranks 0 and 1 end equal: the run does not tell mixings apart")
			}
		})
	}
}

// TestDmSGDResume stops a one-peer run between mixings, after 3 (W(3) ≠
// W(0)), writes a checkpoint set, resumes new workers from it, and checks
// that the parameters and records equal the uninterrupted run's bit for
// bit: the resumed workers must go on with the right W(k).
func TestDmSGDResume(t *testing.T) {
	data := bands(96, 8, 8, 4)
	const k = 4
	cfg := smallConfig(k)
	mk := dmsgd(gossip.OnePeerExponential(k), 2)
	whole := runK(t, cfg, data, k, nil, mk, 0, "")
	parts := runK(t, cfg, data, k, nil, mk, 7, filepath.Join(t.TempDir(), "run.ckpt"))
	for r := range k {
		if !nntest.Equal(whole[r].final, parts[r].final) {
			t.Errorf("rank %d: final parameters differ after resuming", r)
		}
	}
	a, b := whole[0].records, parts[0].records
	if len(a) != len(b) {
		t.Fatalf("%d records, resumed run %d", len(a), len(b))
	}
	for i := range a {
		ra, rb := a[i], b[i]
		if ra.Kind != rb.Kind || ra.Step != rb.Step || ra.Loss != rb.Loss ||
			(ra.Comm == nil) != (rb.Comm == nil) || ra.Comm != nil && (ra.Comm.Sent != rb.Comm.Sent || ra.Comm.Consensus != rb.Comm.Consensus || ra.Comm.Syncs != rb.Comm.Syncs) {
			t.Errorf("record %d: %+v, resumed %+v", i, ra, rb)
		}
	}
}

// stub is a worker without a Trainer: two parameters, of 6 and 5
// elements, and a DmSGD.
type stub struct {
	d *gossip.DmSGD
	s *train.StepContext
}

func newStubs(t *testing.T, topo gossip.Topology, j int) []stub {
	t.Helper()
	comms := dist.NewLocal(topo.Nodes())
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	stubs := make([]stub, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		d, err := gossip.NewDmSGD(c, gossip.DmSGDOptions{Topology: topo, LocalSteps: j})
		if err != nil {
			t.Fatal(err)
		}
		s := &train.StepContext{Params: []nn.NamedParameter{
			{Name: "a", Param: autograd.Param(tensor.Zeros(tensor.Shape{2, 3}))},
			{Name: "b", Param: autograd.Param(tensor.Zeros(tensor.Shape{5}))},
		}}
		stubs[r] = stub{d, s}
		t.Cleanup(d.Close)
		wg.Go(func() { errs[r] = d.Setup(s) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return stubs
}

// set gives rank r's parameters the values v[0:6] and v[6:11].
func (w stub) set(v []float64) {
	for i, off := range []int{0, 6} {
		p := w.s.Params[i].Param.Value
		src := tensor.FromSlice(v[off:off+p.NumElements()], p.Shape())
		p.CopyFrom(src)
		src.Release()
	}
}

func (w stub) get() []float64 {
	return append(w.s.Params[0].Param.Value.Float64s(), w.s.Params[1].Param.Value.Float64s()...)
}

// step runs AfterStep of step i on every stub.
func step(t *testing.T, stubs []stub, i int) {
	t.Helper()
	errs := make([]error, len(stubs))
	var wg sync.WaitGroup
	for r, w := range stubs {
		w.s.Step = i
		wg.Go(func() { errs[r] = w.d.AfterStep(w.s) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestDmSGDOnePeerAveragesExactly mixes integer parameters, without
// gradient steps, over the one-peer exponential graph: after τ mixings
// every worker holds the average exactly for n = 4 and 8 (all the sums
// are of dyadic numbers), not before, and not for n = 6. It also checks
// the consensus distance of the first mixing exactly (on 11 parameters
// it samples them all).
func TestDmSGDOnePeerAveragesExactly(t *testing.T) {
	for _, tt := range []struct {
		n     int
		exact bool
	}{{4, true}, {8, true}, {6, false}} {
		t.Run(fmt.Sprint("n=", tt.n), func(t *testing.T) {
			topo := gossip.OnePeerExponential(tt.n)
			tau := topo.Period()
			stubs := newStubs(t, topo, 1)
			x := make([][]float64, tt.n)
			avg := make([]float64, 11)
			r := rand.New(rand.NewPCG(uint64(tt.n), 2))
			for i, w := range stubs {
				x[i] = make([]float64, 11)
				for e := range x[i] {
					x[i][e] = float64(r.IntN(200) - 100)
					avg[e] += x[i][e] / float64(tt.n)
				}
				w.set(x[i])
			}
			for i := range tau {
				step(t, stubs, i)
				if i == tau-2 && tt.exact && slices.Equal(stubs[0].get(), avg) {
					t.Errorf("rank 0 holds the average after %d of τ = %d mixings", i+1, tau)
				}
				if i == 1 {
					// The second mixing's probe averaged the first's distances.
					if got, want := stubs[0].d.CommStats().Consensus, distanceTo(x, avg); math.Abs(got-want) > 1e-5*want {
						t.Errorf("consensus distance of the first mixing %v, want %v", got, want)
					}
				}
			}
			for i, w := range stubs {
				if got := w.get(); slices.Equal(got, avg) != tt.exact {
					t.Errorf("rank %d: %v after τ = %d mixings, average %v; want exact: %v", i, got, tau, avg, tt.exact)
				}
				if w.d.Mixings() != tau {
					t.Errorf("rank %d: %d mixings counted, want %d", i, w.d.Mixings(), tau)
				}
			}
		})
	}
}

// distanceTo returns mean_i ‖x_i − avg‖/‖avg‖.
func distanceTo(x [][]float64, avg []float64) float64 {
	norm := 0.0
	for _, v := range avg {
		norm += v * v
	}
	d := 0.0
	for i := range x {
		d2 := 0.0
		for e, v := range x[i] {
			d2 += (v - avg[e]) * (v - avg[e])
		}
		d += math.Sqrt(d2/norm) / float64(len(x))
	}
	return d
}

// TestDmSGDCommStats counts the bytes and messages of two mixings with J
// = 2 over the static exponential graph on 4 nodes (in- and out-degree
// 2), and the end of the run's consensus all-reduce.
func TestDmSGDCommStats(t *testing.T) {
	const k, j, steps = 4, 2, 4
	stubs := newStubs(t, gossip.Exponential(k), j)
	for i := range steps {
		for _, w := range stubs {
			w.s.TotalSteps = steps
		}
		step(t, stubs, i)
	}
	const pbytes = 11 * 4 // float32 parameters
	probe := dist.AllReduceBytes((11+2)*4, k)
	want := train.CommStats{
		Sent:              2*2*pbytes + 2*probe + dist.AllReduceBytes(4, k),
		Collectives:       2*(2+2+1) + 1,
		Syncs:             2,
		DataParallelBytes: steps * dist.AllReduceBytes(pbytes, k),
		SetupBytes:        stubs[0].d.CommStats().SetupBytes,
	}
	want.Received = want.Sent
	got := stubs[0].d.CommStats()
	got.Blocked = 0
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if got.SetupBytes == 0 {
		t.Errorf("the initial broadcast is not counted")
	}
}

func TestDmSGDNames(t *testing.T) {
	c := dist.NewLocal(8)
	for _, tt := range []struct {
		topo gossip.Topology
		j    int
		want string
	}{
		{gossip.Exponential(8), 0, "DmSGD over the static exponential graph, 8 nodes, τ = 3"},
		{gossip.Ring(8), 4, "DmSGD over the ring, 8 nodes, mixing every 4 steps"},
	} {
		d, err := gossip.NewDmSGD(c[0], gossip.DmSGDOptions{Topology: tt.topo, LocalSteps: tt.j})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.String(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
	if _, err := gossip.NewDmSGD(c[0], gossip.DmSGDOptions{Topology: gossip.Ring(4)}); err == nil {
		t.Errorf("a topology of 4 nodes for 8 workers is accepted")
	}
}

// evalProbe records, at each evaluation, the parameters the model holds
// once DmSGD has prepared it.
type evalProbe struct {
	*gossip.DmSGD
	seen []map[string][]float32
	mine []map[string][]float32
}

func (p *evalProbe) BeforeEval(s *train.StepContext) (func() error, error) {
	p.mine = append(p.mine, nntest.Values(s.Params))
	restore, err := p.DmSGD.BeforeEval(s)
	if err == nil {
		p.seen = append(p.seen, nntest.Values(s.Params))
	}
	return restore, err
}

// TestDmSGDEvaluatesAverage checks that an evaluation sees the workers'
// average, that evaluating changes nothing of the run, and that its bytes
// are counted apart.
func TestDmSGDEvaluatesAverage(t *testing.T) {
	const k = 4
	data := bands(64, 8, 8, 21)
	test := bands(20, 8, 8, 22)
	cfg := smallConfig(k)
	cfg.EvalEvery = 1
	train1 := func(withTest bool) ([]*evalProbe, []map[string][]float32, []train.CommStats) {
		comms := dist.NewLocal(k)
		probes := make([]*evalProbe, k)
		finals := make([]map[string][]float32, k)
		stats := make([]train.CommStats, k)
		var wg sync.WaitGroup
		for r := range k {
			wg.Go(func() {
				d, err := gossip.NewDmSGD(comms[r], gossip.DmSGDOptions{Topology: gossip.Ring(k)})
				if err != nil {
					t.Error(err)
					return
				}
				defer d.Close()
				probes[r] = &evalProbe{DmSGD: d}
				opts := train.Options{Strategy: probes[r], Rank: r, World: k}
				ts := test
				if r > 0 || !withTest {
					ts, opts.PeerEvaluates = nil, withTest
				}
				tr, err := train.New(cfg, data, ts, opts)
				if err != nil {
					t.Error(err)
					return
				}
				defer tr.Close()
				if _, err := tr.Run(context.Background()); err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
				finals[r] = nntest.Values(tr.Model().NamedParameters())
				stats[r] = d.CommStats()
			})
		}
		wg.Wait()
		return probes, finals, stats
	}
	probes, with, st := train1(true)
	_, without, st0 := train1(false)
	if len(probes[0].seen) != cfg.Epochs || len(probes[1].seen) != cfg.Epochs {
		t.Fatalf("%d and %d evaluations prepared, want %d", len(probes[0].seen), len(probes[1].seen), cfg.Epochs)
	}
	for e := range cfg.Epochs {
		if nntest.Equal(probes[0].mine[e], probes[1].mine[e]) {
			t.Fatalf("epoch %d: the workers hold the same parameters; the test cannot tell an average", e+1)
		}
		for name, a := range probes[0].mine[e] {
			for i := range a {
				want := 0.0
				for _, p := range probes {
					want += float64(p.mine[e][name][i]) / k
				}
				if got := float64(probes[0].seen[e][name][i]); math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
					t.Fatalf("epoch %d %s[%d]: evaluated %v, want the workers' mean %v", e+1, name, i, got, want)
				}
			}
		}
	}
	for r := range k {
		if !nntest.Equal(with[r], without[r]) {
			t.Errorf("rank %d: evaluating changed the run", r)
		}
	}
	if st[0].EvalBytes == 0 || st0[0].EvalBytes != 0 || st[0].Sent != st0[0].Sent {
		t.Errorf("evaluation bytes %d (training %d) with evaluations, %d (training %d) without", st[0].EvalBytes, st[0].Sent, st0[0].EvalBytes, st0[0].Sent)
	}
}

// TestDmSGDLoadsOlderState checks that the state of a checkpoint written
// before DmSGD's accounting was shared — its mixings, without a count of
// synchronizations — still loads, the mixings picking W(k) as before, and
// that a state whose two counts disagree is refused.
func TestDmSGDLoadsOlderState(t *testing.T) {
	c := dist.NewLocal(1)[0]
	defer c.Close()
	topo := gossip.OnePeerExponential(1)
	older := map[string]string{
		"kind": "dmsgd", "topology": topo.String(), "local_steps": "1", "mixings": "7", "pending": "",
		"dp_bytes": "100", "consensus": "0.25", "blocked_ns": "5", "traffic.sent": "40", "traffic.recv": "40", "traffic.ops": "3",
		"setup.sent": "8", "setup.recv": "8", "setup.ops": "1", "eval.sent": "0", "eval.recv": "0", "eval.ops": "0",
	}
	d, err := gossip.NewDmSGD(c, gossip.DmSGDOptions{Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadState(nil, older); err != nil {
		t.Fatal(err)
	}
	if st := d.CommStats(); d.Mixings() != 7 || st.Syncs != 7 || st.DataParallelBytes != 100 || st.Sent != 32 || st.Consensus != 0.25 {
		t.Errorf("loaded %d mixings, counts %+v", d.Mixings(), st)
	}
	older["syncs"] = "6"
	if err := d.LoadState(nil, older); err == nil || !strings.Contains(err.Error(), "7 mixings but 6") {
		t.Errorf("disagreeing counts: %v", err)
	}
}
