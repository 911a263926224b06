package optim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Group is a set of parameters that share a learning rate and a weight decay,
// like a PyTorch param group.
type Group struct {
	Params []*autograd.Var
	// Names are the parameters' dotted names, parallel to Params (optional;
	// used in state dicts and error messages).
	Names []string
	// LR is the group's current learning rate. Schedules set it through
	// Optimizer.SetLR, which keeps the ratio between groups.
	LR float64
	// WeightDecay is the group's decay coefficient.
	WeightDecay float64
	// NoAdapt excludes the group from LARS's layer-wise adaptation (biases
	// and normalisation parameters, by convention).
	NoAdapt bool

	baseLR float64
}

// Optimizer updates parameters from their gradients.
type Optimizer interface {
	// Step applies one update to every parameter that has a gradient.
	Step()
	// ZeroGrad clears every parameter's gradient.
	ZeroGrad()
	// Groups returns the parameter groups (shared, not copied).
	Groups() []*Group
	// SetLR sets the learning rate: a group whose initial rate was r₀ gets
	// lr·(r₀/r₀') where r₀' is the first group's initial rate, so per-group
	// ratios survive scheduling (groups that started at r₀' get exactly lr;
	// when r₀' is 0 every group gets lr).
	SetLR(lr float64)
	// State returns the optimizer's state for a checkpoint: copies of its
	// buffers, which the caller releases, keyed by
	// "<param name or index>.<buffer>", and the scalars "step" and
	// "group.<i>.lr" as strings.
	State() (map[string]*tensor.Tensor, map[string]string)
	// LoadState replaces the optimizer's state with copies of what State
	// returned (converted to each parameter's dtype and device). Keys that
	// name no parameter or buffer, shapes that differ from the parameter's,
	// and a missing or malformed step are errors, which leave the optimizer
	// unchanged.
	LoadState(tensors map[string]*tensor.Tensor, scalars map[string]string) error
	// Release frees the optimizer's buffers (momentum, moments); the
	// optimizer must not step afterwards. The parameters are not touched.
	Release()
}

// NewGroup returns a group of params with the given names, rate and decay.
func NewGroup(params []*autograd.Var, names []string, lr, weightDecay float64) *Group {
	return &Group{Params: params, Names: names, LR: lr, WeightDecay: weightDecay}
}

// base holds what every optimizer shares: groups and per-parameter state.
type base struct {
	groups []*Group
	// buffers names the per-parameter buffers the optimizer may keep.
	buffers []string
	// state holds per-parameter buffers by buffer name, in group order.
	state []map[string]*tensor.Tensor
	step  int64
	// scales holds the update scales set by SetUpdateScale (SGD, LARS).
	scales map[*autograd.Var]float64
}

// UpdateScaler is implemented by the optimizers (SGD, LARS) that can scale
// one parameter's update: strategies that update a parameter only on some
// steps (JointSpar) scale those updates by 1/p so that the expected update
// is the full one, which scaling the gradient cannot do for LARS, whose
// trust ratio undoes any scale of the gradient.
type UpdateScaler interface {
	// SetUpdateScale makes the following steps multiply p's update
	// direction d = g + λ·p (SGD; for LARS r·(g + λ·p), or g without
	// adaptation) by s before the momentum takes it; s = 1 clears it.
	SetUpdateScale(p *autograd.Var, s float64)
}

// Adaptive is implemented by the optimizers (LARS) that scale some
// parameters' updates layer-wise and step the others — biases and
// normalisation parameters — with the plain gradient at the same rate.
type Adaptive interface {
	// Adapts reports whether p's update is scaled layer-wise.
	Adapts(p *autograd.Var) bool
}

func (b *base) setUpdateScale(p *autograd.Var, s float64) {
	if s == 1 {
		delete(b.scales, p)
		return
	}
	if !(s > 0) || math.IsInf(s, 0) {
		panic(fmt.Sprintf("optim: SetUpdateScale(%v): want a finite scale > 0", s))
	}
	if b.scales == nil {
		b.scales = map[*autograd.Var]float64{}
	}
	b.scales[p] = s
}

// updateScale returns p's update scale (1 when none is set).
func (b *base) updateScale(p *autograd.Var) float64 {
	if s, ok := b.scales[p]; ok {
		return s
	}
	return 1
}

func newBase(kind string, groups []*Group, buffers ...string) base {
	b := base{groups: groups, buffers: buffers}
	for gi, g := range groups {
		if len(g.Names) != 0 && len(g.Names) != len(g.Params) {
			panic(fmt.Sprintf("optim: %s: group %d has %d names for %d parameters", kind, gi, len(g.Names), len(g.Params)))
		}
		if g.LR < 0 || math.IsNaN(g.LR) {
			panic(fmt.Sprintf("optim: %s: group %d: invalid learning rate %v", kind, gi, g.LR))
		}
		g.baseLR = g.LR
		for range g.Params {
			b.state = append(b.state, map[string]*tensor.Tensor{})
		}
	}
	seen := map[string]bool{}
	for i := range b.state {
		name := b.paramName(i)
		if seen[name] {
			panic(fmt.Sprintf("optim: %s: two parameters named %q", kind, name))
		}
		seen[name] = true
	}
	return b
}

// each calls fn for every parameter with a gradient, with its group and
// state.
func (b *base) each(fn func(g *Group, p *autograd.Var, st map[string]*tensor.Tensor)) {
	i := 0
	for _, g := range b.groups {
		for _, p := range g.Params {
			if p.Grad() != nil {
				fn(g, p, b.state[i])
			}
			i++
		}
	}
}

func (b *base) Groups() []*Group { return b.groups }

func (b *base) Release() {
	for _, st := range b.state {
		for k, t := range st {
			t.Release()
			delete(st, k)
		}
	}
}

func (b *base) ZeroGrad() {
	for _, g := range b.groups {
		for _, p := range g.Params {
			p.ZeroGrad()
		}
	}
}

func (b *base) SetLR(lr float64) {
	if len(b.groups) == 0 {
		return
	}
	ref := b.groups[0].baseLR
	for _, g := range b.groups {
		if ref == 0 {
			g.LR = lr
		} else {
			g.LR = lr * (g.baseLR / ref)
		}
	}
}

// buffer returns the state buffer name of st, creating it as zeros shaped
// like p when absent.
func buffer(st map[string]*tensor.Tensor, name string, p *autograd.Var) *tensor.Tensor {
	if t, ok := st[name]; ok {
		return t
	}
	t := tensor.ZerosLike(p.Value)
	st[name] = t
	return t
}

func (b *base) paramName(i int) string {
	k := 0
	for _, g := range b.groups {
		for j := range g.Params {
			if k == i {
				if len(g.Names) > 0 {
					return g.Names[j]
				}
				return fmt.Sprint(i)
			}
			k++
		}
	}
	return fmt.Sprint(i)
}

func (b *base) paramAt(i int) *autograd.Var {
	k := 0
	for _, g := range b.groups {
		for _, p := range g.Params {
			if k == i {
				return p
			}
			k++
		}
	}
	return nil
}

func (b *base) State() (map[string]*tensor.Tensor, map[string]string) {
	ts := map[string]*tensor.Tensor{}
	for i, st := range b.state {
		name := b.paramName(i)
		for k, t := range st {
			ts[name+"."+k] = t.Clone()
		}
	}
	scalars := map[string]string{"step": strconv.FormatInt(b.step, 10)}
	for gi, g := range b.groups {
		scalars[fmt.Sprintf("group.%d.lr", gi)] = strconv.FormatFloat(g.LR, 'g', -1, 64)
	}
	return ts, scalars
}

func (b *base) LoadState(ts map[string]*tensor.Tensor, scalars map[string]string) error {
	index := map[string]int{}
	for i := range b.state {
		index[b.paramName(i)] = i
	}
	fresh := make([]map[string]*tensor.Tensor, len(b.state))
	for i := range fresh {
		fresh[i] = map[string]*tensor.Tensor{}
	}
	release := func() {
		for _, st := range fresh {
			for _, t := range st {
				t.Release()
			}
		}
	}
	for k, t := range ts {
		dot := strings.LastIndexByte(k, '.')
		i, ok := index[k[:max(dot, 0)]]
		if dot < 0 || !ok {
			release()
			return fmt.Errorf("optim: load state: %q matches no parameter", k)
		}
		if !slices.Contains(b.buffers, k[dot+1:]) {
			release()
			return fmt.Errorf("optim: load state: %q: no buffer %q (want one of %v)", k, k[dot+1:], b.buffers)
		}
		p := b.paramAt(i)
		if !t.Shape().Equal(p.Value.Shape()) {
			release()
			return fmt.Errorf("optim: load state: %s has shape %v, parameter %s has %v", k, t.Shape(), k[:dot], p.Value.Shape())
		}
		moved := t.To(p.Value.Device())
		fresh[i][k[dot+1:]] = moved.Cast(p.Value.DType())
		moved.Release()
	}
	step, err := strconv.ParseInt(scalars["step"], 10, 64)
	if err == nil && step < 0 {
		err = errors.New("negative step")
	}
	if err != nil {
		release()
		return fmt.Errorf("optim: load state: step %q: %w", scalars["step"], err)
	}
	lrs := make([]float64, len(b.groups))
	for gi, g := range b.groups {
		lrs[gi] = g.LR
		key := fmt.Sprintf("group.%d.lr", gi)
		if s, ok := scalars[key]; ok {
			lr, err := strconv.ParseFloat(s, 64)
			if err == nil && (lr < 0 || math.IsNaN(lr)) {
				err = errors.New("invalid learning rate")
			}
			if err != nil {
				release()
				return fmt.Errorf("optim: load state: %s %q: %w", key, s, err)
			}
			lrs[gi] = lr
		}
	}
	for k := range scalars {
		if gi, ok := groupKey(k); k != "step" && (!ok || gi >= len(b.groups)) {
			release()
			return fmt.Errorf("optim: load state: unknown scalar %q", k)
		}
	}
	for _, st := range b.state {
		for _, t := range st {
			t.Release()
		}
	}
	for gi, g := range b.groups {
		g.LR = lrs[gi]
	}
	b.state = fresh
	b.step = step
	return nil
}

// groupKey parses "group.<i>.lr" into i.
func groupKey(k string) (int, bool) {
	rest, ok := strings.CutPrefix(k, "group.")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, ".lr")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	return i, err == nil && i >= 0
}

// StateBuffers returns the optimizer's live buffer field ("momentum_buffer",
// "exp_avg", …) of every parameter, in group order, parallel to the
// parameters: strategies average them across workers in place. A
// parameter that has not been stepped yet gets a zero buffer, which
// starts the same as the one its first step would make for SGD without
// dampening, LARS and AdamW. It fails for a field this optimizer does not
// keep.
func (b *base) StateBuffers(field string) ([]*autograd.Var, []*tensor.Tensor, error) {
	if !slices.Contains(b.buffers, field) {
		return nil, nil, fmt.Errorf("optim: no state field %q (this optimizer keeps %s)", field, strings.Join(b.buffers, ", "))
	}
	var ps []*autograd.Var
	var ts []*tensor.Tensor
	i := 0
	for _, g := range b.groups {
		for _, p := range g.Params {
			ps = append(ps, p)
			ts = append(ts, buffer(b.state[i], field, p))
			i++
		}
	}
	return ps, ts, nil
}

// NameOf returns the name, as Name writes it, of the optimizer a
// configuration calls kind ("sgd", "adamw", "lars"; kind itself for
// another).
func NameOf(kind string) string {
	switch kind {
	case "sgd":
		return "SGD"
	case "adamw":
		return "AdamW"
	case "lars":
		return "LARS"
	}
	return kind
}

// Name returns the name of o's algorithm as papers write it: "SGD",
// "AdamW", "LARS" (the Go type for other optimizers).
func Name(o Optimizer) string {
	switch o.(type) {
	case *SGD:
		return "SGD"
	case *AdamW:
		return "AdamW"
	case *LARS:
		return "LARS"
	}
	return fmt.Sprintf("%T", o)
}
