package sparse_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/sparse"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// BenchmarkBackward measures JointSpar's backward pass against the budget
// on the CNN (batch 128, 28×28×1) and ResNet-20 (batch 64, 32×32×3): the
// time of backward per step (bwd-ms/step, over steps with different draws)
// and the gradient bytes a step all-reduces (grad-bytes/step; the ring
// all-reduce sends 2(K−1)/K of them per worker). Run with
//
//	go test ./sparse -run XXX -bench Backward -benchtime 40x
func BenchmarkBackward(b *testing.B) {
	for _, m := range []struct {
		name           string
		batch, side, c int
	}{{"cnn", 128, 28, 1}, {"resnet20", 64, 32, 3}} {
		for _, budget := range []float64{0.25, 0.5, 1} {
			b.Run(fmt.Sprintf("%s/budget=%g", m.name, budget), func(b *testing.B) {
				g := tensor.NewGenerator(1)
				model, err := models.Build(m.name, models.Config{InChannels: m.c, Height: m.side, Width: m.side, NumClasses: 10}, g)
				if err != nil {
					b.Fatal(err)
				}
				defer model.Release()
				params := model.NamedParameters()
				vars := make([]*autograd.Var, len(params))
				names := make([]string, len(params))
				for i, p := range params {
					vars[i], names[i] = p.Param, p.Name
				}
				o := optim.NewSGD([]*optim.Group{optim.NewGroup(vars, names, 0.1, 0)}, optim.SGDOptions{})
				js, err := sparse.New(dist.NewLocal(1)[0], sparse.Options{Budget: budget, Seed: 2})
				if err != nil {
					b.Fatal(err)
				}
				defer js.Close()
				sc := &train.StepContext{Params: params, Model: model, Optimizer: o, TotalSteps: 1 << 30, StepsPerEpoch: 1 << 30}
				if err := js.Setup(sc); err != nil {
					b.Fatal(err)
				}
				x := g.Normal(tensor.Shape{m.batch, m.c, m.side, m.side}, 0, 1)
				defer x.Release()
				labels := make([]int64, m.batch)
				for i := range labels {
					labels[i] = int64(i % 10)
				}
				y := tensor.FromSlice(labels, tensor.Shape{m.batch})
				defer y.Release()
				var bwd time.Duration
				var bytes int64
				step := func(s int) {
					sc.Step = s
					js.BeforeStep(sc)
					in := autograd.Const(x.Retain())
					out := model.Forward(in)
					loss := autograd.CrossEntropy(out, y, autograd.CrossEntropyOptions{})
					start := time.Now()
					if loss.RequiresGrad() {
						loss.Backward()
					}
					bwd += time.Since(start)
					loss.Release()
					out.Release()
					in.Release()
					for _, p := range params {
						if gr := p.Param.Grad(); gr != nil {
							bytes += int64(4 * gr.NumElements())
						}
					}
					js.AfterBackward(sc)
					js.AfterStep(sc)
					o.ZeroGrad()
				}
				for s := range 3 {
					step(-1 - s)
				}
				bwd, bytes = 0, 0
				b.ResetTimer()
				for s := range b.N {
					step(s)
				}
				b.ReportMetric(float64(bwd.Microseconds())/1000/float64(b.N), "bwd-ms/step")
				b.ReportMetric(float64(bytes)/float64(b.N), "grad-bytes/step")
			})
		}
	}
}
