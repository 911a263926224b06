// Command charlm defines a model in Go — a small character-level
// transformer — and trains it with flock as a library: 4 in-process
// workers, Local AdamW whose synchronizations follow the Quadratic
// Synchronization Rule, on the opening of Isaac Newton's Opticks (the 4th
// edition of 1730, in the public domain; the text the Go distribution
// ships in src/testdata, underscores of italics removed and æ spelt ae).
//
// Nothing here is flock's own model, loss or data: the network is a
// struct of nn layers with its Forward, the loss a train.Task, the data a
// train.TensorData of windows of the text. job.Run trains it as flock
// train trains its image models.
//
//	go run .                  # 4 workers, 10 epochs, then a sample
//	go run . --workers 8 --epochs 20 --qsr-alpha 0.01
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

//go:embed opticks.txt
var opticks string

// charLM is a decoder-only transformer over bytes: token and position
// embeddings, pre-norm blocks of causal self-attention and an MLP, a
// final norm and a projection to the vocabulary's logits.
type charLM struct {
	nn.Base
	tokens *nn.Embedding
	pos    *autograd.Var // [T, D]
	blocks []*block
	norm   *nn.LayerNorm
	head   *nn.Linear
	mask   *tensor.Tensor // [T, T] Bool, true above the diagonal
}

type block struct {
	nn.Base
	norm1, norm2 *nn.LayerNorm
	attn         *nn.MultiheadAttention
	up, down     *nn.Linear
}

func newCharLM(vocab, context, dim, heads, layers int, g *tensor.Generator) *charLM {
	m := &charLM{tokens: nn.NewEmbedding(vocab, dim, g)}
	m.RegisterModule("tokens", m.tokens)
	pos := tensor.Empty(tensor.Shape{context, dim})
	nn.Normal(pos, 0, 0.02, g)
	m.pos = m.RegisterParameter("pos", autograd.Param(pos))
	for i := range layers {
		b := &block{
			norm1: nn.NewLayerNorm(tensor.Shape{dim}, nn.LayerNormOptions{}),
			norm2: nn.NewLayerNorm(tensor.Shape{dim}, nn.LayerNormOptions{}),
			attn:  nn.NewMultiheadAttention(dim, heads, nn.AttentionOptions{}, g),
			up:    nn.NewLinear(dim, 4*dim, true, g),
			down:  nn.NewLinear(4*dim, dim, true, g),
		}
		b.RegisterModule("norm1", b.norm1)
		b.RegisterModule("attn", b.attn)
		b.RegisterModule("norm2", b.norm2)
		b.RegisterModule("up", b.up)
		b.RegisterModule("down", b.down)
		m.blocks = append(m.blocks, b)
		m.RegisterModule(fmt.Sprintf("blocks%d", i), b)
	}
	m.norm = nn.NewLayerNorm(tensor.Shape{dim}, nn.LayerNormOptions{})
	m.RegisterModule("norm", m.norm)
	m.head = nn.NewLinear(dim, vocab, true, g)
	m.RegisterModule("head", m.head)
	future := make([]bool, context*context)
	for i := range context {
		for j := i + 1; j < context; j++ {
			future[i*context+j] = true
		}
	}
	m.mask = tensor.FromSlice(future, tensor.Shape{context, context})
	return m
}

// Forward maps token ids x [B, T] (T up to the context) to next-token
// logits [B, T, V].
func (m *charLM) Forward(x *autograd.Var) *autograd.Var {
	t := x.Value.Size(1)
	h := m.tokens.Forward(x)
	pos := autograd.Slice(m.pos, 0, 0, t)
	h = swap(h, autograd.Add(h, pos))
	pos.Release()
	mask := m.mask
	if t < m.mask.Size(0) {
		rows := m.mask.Slice(0, 0, t)
		mask = rows.Slice(1, 0, t)
		rows.Release()
		defer mask.Release()
	}
	for _, b := range m.blocks {
		n := b.norm1.Forward(h)
		a := b.attn.Attend(n, mask)
		n.Release()
		h = swap(h, autograd.Add(h, a))
		a.Release()
		n = b.norm2.Forward(h)
		u := b.up.Forward(n)
		n.Release()
		g := autograd.GELU(u)
		u.Release()
		d := b.down.Forward(g)
		g.Release()
		h = swap(h, autograd.Add(h, d))
		d.Release()
	}
	n := m.norm.Forward(h)
	h.Release()
	defer n.Release()
	return m.head.Forward(n)
}

// swap releases old and returns new: h = swap(h, f(h)).
func swap(old, new *autograd.Var) *autograd.Var {
	old.Release()
	return new
}

// Release frees the mask with the parameters.
func (m *charLM) Release() {
	m.mask.Release()
	m.Base.Release()
}

// nextChar is the task: cross-entropy of every position's logits against
// the next byte, the mean over positions; no accuracy.
type nextChar struct{}

func (nextChar) flat(out *autograd.Var, target *tensor.Tensor) (*autograd.Var, *tensor.Tensor) {
	v := out.Value.Size(-1)
	return autograd.Reshape(out, -1, v), target.Reshape(-1)
}

func (c nextChar) Loss(out *autograd.Var, target *tensor.Tensor) *autograd.Var {
	logits, y := c.flat(out, target)
	defer logits.Release()
	defer y.Release()
	return autograd.CrossEntropy(logits, y, autograd.CrossEntropyOptions{})
}

// EvalLoss is the sum over the batch's sequences of their mean loss per
// character, so that the Trainer's mean over sequences is nats per
// character.
func (c nextChar) EvalLoss(out *autograd.Var, target *tensor.Tensor) float64 {
	logits, y := c.flat(out, target)
	defer logits.Release()
	defer y.Release()
	l := autograd.CrossEntropy(logits, y, autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum})
	defer l.Release()
	return l.Value.Item() / float64(target.Size(1))
}

func (nextChar) Correct(_, _ *tensor.Tensor) int64 { return -1 }

// windows cuts text (as vocabulary indices) into sequences of context
// tokens every stride, with their targets one token on: x, y [N, context].
func windows(ids []int64, context, stride int) (x, y *tensor.Tensor) {
	var xs, ys []int64
	n := 0
	for s := 0; s+context+1 <= len(ids); s += stride {
		xs = append(xs, ids[s:s+context]...)
		ys = append(ys, ids[s+1:s+context+1]...)
		n++
	}
	return tensor.FromSlice(xs, tensor.Shape{n, context}), tensor.FromSlice(ys, tensor.Shape{n, context})
}

func main() {
	workers := flag.Int("workers", 4, "in-process workers")
	epochs := flag.Int("epochs", 10, "passes over the training text")
	seqLen := flag.Int("context", 32, "characters a prediction sees")
	dim := flag.Int("dim", 48, "width of the transformer")
	layers := flag.Int("layers", 2, "transformer blocks")
	batch := flag.Int("batch-size", 32, "sequences per worker and step")
	lr := flag.Float64("lr", 0.01, "peak learning rate of AdamW")
	alpha := flag.Float64("qsr-alpha", 0.02, "QSR's α: H = max(2, ⌊(α/η)²⌋)")
	sample := flag.Int("sample", 240, "characters to generate after training")
	flag.Parse()
	if err := run(*workers, *epochs, *seqLen, *dim, *layers, *batch, *lr, *alpha, *sample); err != nil {
		fmt.Fprintln(os.Stderr, "charlm:", err)
		os.Exit(1)
	}
}

func run(workers, epochs, seqLen, dim, layers, batch int, lr, alpha float64, sample int) error {
	// The vocabulary: the text's bytes, in order.
	var vocab []byte
	for i := range len(opticks) {
		if !slices.Contains(vocab, opticks[i]) {
			vocab = append(vocab, opticks[i])
		}
	}
	slices.Sort(vocab)
	ids := make([]int64, len(opticks))
	for i := range len(opticks) {
		ids[i] = int64(slices.Index(vocab, opticks[i]))
	}
	// The last tenth of the text is held out for validation.
	cut := len(ids) * 9 / 10
	trainX, trainY := windows(ids[:cut], seqLen, seqLen/2)
	valX, valY := windows(ids[cut:], seqLen, seqLen)
	defer func() {
		for _, t := range []*tensor.Tensor{trainX, trainY, valX, valY} {
			t.Release()
		}
	}()

	cfg := train.DefaultConfig()
	cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.LR = "charlm", epochs, batch, lr
	cfg.Optimizer, cfg.WeightDecay, cfg.WarmupEpochs, cfg.LogEvery = "adamw", 0.01, 0.5, 0
	sync := localopt.DefaultSettings()
	sync.Sync, sync.Alpha, sync.HBase = "qsr", alpha, 2
	cfg.Strategy = train.StrategyConfig{Name: "local", Settings: sync}
	if err := cfg.Strategy.Validate(); err != nil {
		return err
	}

	var datas []*train.TensorData
	defer func() {
		for _, d := range datas {
			d.Close()
		}
	}()
	build := func(cfg train.Config, withTest bool, opts train.Options) (*train.Trainer, func(), error) {
		data, err := train.NewTensorData(trainX, trainY, dataset.LoaderOptions{BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed, Rank: opts.Rank, World: opts.World})
		if err != nil {
			return nil, nil, err
		}
		datas = append(datas, data)
		var test train.Batches
		if withTest {
			val, err := train.NewTensorData(valX, valY, dataset.LoaderOptions{BatchSize: 64})
			if err != nil {
				return nil, nil, err
			}
			datas = append(datas, val)
			test = val
		}
		// Every worker starts from the same weights (the strategy
		// broadcasts rank 0's anyway).
		model := newCharLM(len(vocab), seqLen, dim, dim/12, layers, tensor.NewGenerator(cfg.Seed))
		t, err := train.NewModule(cfg, model, nextChar{}, data, test, opts)
		return t, func() {}, err
	}

	fmt.Printf("charlm: %d-byte vocabulary, %d training and %d validation windows of %d characters, %d workers\n",
		len(vocab), trainX.Size(0), valX.Size(0), seqLen, workers)
	var first []map[string][]float32
	var text string
	res, err := job.Run(context.Background(), job.Spec{
		Config: cfg, Comms: dist.NewLocal(workers), Build: build, Test: true,
		StepsPerEpoch: (trainX.Size(0) / workers) / batch,
		OnStart: func(t *train.Trainer, _ train.Strategy) {
			loss, _ := t.Evaluate()
			fmt.Printf("Local AdamW under QSR (α = %g, Hbase = 2), %d parameters\n", alpha, nn.NumParameters(t.Model()))
			fmt.Printf("validation loss at the start: %.4f nats/char (ln %d = %.4f)\n", loss, len(vocab), math.Log(float64(len(vocab))))
		},
		OnRecord: func(r train.Record) {
			if r.Kind == train.KindEval {
				fmt.Printf("epoch %d: validation loss %.4f nats/char\n", r.Epoch, r.Loss)
			}
		},
		OnFinish: func(rank int, t *train.Trainer) {
			w := map[string][]float32{}
			for _, p := range t.Model().NamedParameters() {
				w[p.Name] = slices.Clone(p.Param.Value.Float32s())
			}
			first = append(first, w)
			if rank == 0 && sample > 0 {
				text = generate(t.Model(), vocab, ids[cut:cut+seqLen], seqLen, sample)
			}
		},
	})
	if err != nil {
		return err
	}
	same := true
	for _, w := range first[1:] {
		for name, v := range first[0] {
			same = same && slices.Equal(v, w[name])
		}
	}
	s := res.Summary
	fmt.Printf("final validation loss: %.4f nats/char after %d steps\n", s.TestLoss, s.Steps)
	fmt.Printf("synchronizations: %d, sent per worker %.1f MiB (data parallel: %.1f MiB)\n",
		s.Comm.Syncs, float64(s.Comm.Sent)/(1<<20), float64(s.Comm.DataParallelBytes)/(1<<20))
	fmt.Printf("workers identical after the last synchronization: %v\n", same)
	if text != "" {
		fmt.Printf("sample:\n%s\n", text)
	}
	return nil
}

// generate continues prompt by n characters drawn from the model's
// distribution at temperature 0.8, from a fixed seed.
func generate(m nn.Layer, vocab []byte, prompt []int64, seqLen, n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	ids := slices.Clone(prompt)
	var out strings.Builder
	for _, id := range prompt {
		out.WriteByte(vocab[id])
	}
	out.WriteString("|")
	training := m.Training()
	nn.Eval(m)
	defer m.SetTraining(training)
	autograd.NoGrad(func() {
		for range n {
			window := ids[max(0, len(ids)-seqLen):]
			x := autograd.Const(tensor.FromSlice(window, tensor.Shape{1, len(window)}))
			logits := m.Forward(x)
			x.Release()
			row := logits.Value.Float32s()[(len(window)-1)*len(vocab):]
			logits.Release()
			p := make([]float64, len(vocab))
			top, sum := math.Inf(-1), 0.0
			for _, v := range row {
				top = math.Max(top, float64(v))
			}
			for i, v := range row {
				p[i] = math.Exp((float64(v) - top) / 0.8)
				sum += p[i]
			}
			u, next := r.Float64()*sum, len(p)-1
			for i, v := range p {
				if u -= v; u <= 0 {
					next = i
					break
				}
			}
			ids = append(ids, int64(next))
			out.WriteByte(vocab[next])
		}
	})
	return out.String()
}
