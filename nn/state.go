package nn

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// stateEntry is one tensor of a state dict.
type stateEntry struct {
	name string
	t    *tensor.Tensor
	// zeroIfAbsent marks a batch norm's num_batches_tracked, which PyTorch's
	// BatchNorm fills with 0 when a state dict lacks it.
	zeroIfAbsent bool
}

// stateEntries lists m's state in PyTorch's state_dict order: a module's
// own parameters, then its own buffers, then each child's state. Unlike
// NamedParameters it keeps every name of a shared tensor, as PyTorch does.
func stateEntries(m Module) []stateEntry {
	var out []stateEntry
	var visit func(prefix string, m Module)
	visit = func(prefix string, m Module) {
		cb, ok := m.(baser)
		if !ok {
			for _, p := range m.NamedParameters() {
				out = append(out, stateEntry{prefix + p.Name, p.Param.Value, false})
			}
			for _, b := range m.NamedBuffers() {
				out = append(out, stateEntry{prefix + b.Name, b.Buffer, false})
			}
			return
		}
		b := cb.base()
		for _, p := range b.params {
			out = append(out, stateEntry{prefix + p.Name, p.Param.Value, false})
		}
		_, isBN := m.(*BatchNorm2d)
		for _, p := range b.buffers {
			out = append(out, stateEntry{prefix + p.Name, p.Buffer, isBN && p.Name == "num_batches_tracked"})
		}
		for _, c := range b.children {
			visit(prefix+c.Name+".", c.Module)
		}
	}
	visit("", m)
	return out
}

// StateKeys returns the names of m's state dict in PyTorch's order: each
// module's parameters, then its buffers, then its children's keys.
func StateKeys(m Module) []string {
	entries := stateEntries(m)
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.name
	}
	return keys
}

// StateDict returns m's parameters and buffers by dotted name. The tensors
// are new references sharing storage with the module (as PyTorch's
// state_dict shares it); release them with ReleaseAll.
func StateDict(m Module) map[string]*tensor.Tensor {
	entries := stateEntries(m)
	sd := make(map[string]*tensor.Tensor, len(entries))
	for _, e := range entries {
		sd[e.name] = e.t.Retain()
	}
	return sd
}

// ReleaseAll releases every tensor of a map such as StateDict returns.
func ReleaseAll(sd map[string]*tensor.Tensor) {
	for _, t := range sd {
		t.Release()
	}
}

// LoadStateDict copies the tensors of sd into m's parameters and buffers of
// the same names, in place, converting dtypes as needed (sd is not
// consumed). A tensor whose shape differs from the module's is always an
// error. With strict, keys of m missing from sd and keys of sd that m lacks
// are errors too; otherwise they are skipped. As PyTorch's BatchNorm loads
// a state dict without num_batches_tracked (checkpoints of PyTorch before
// 0.4.1, float-only exports), a batch norm's num_batches_tracked absent from
// sd is set to 0, strict or not. On error nothing is copied, and the message
// names every offending key.
func LoadStateDict(m Module, sd map[string]*tensor.Tensor, strict bool) error {
	entries := stateEntries(m)
	known := make(map[string]bool, len(entries))
	var missing, mismatched []string
	for _, e := range entries {
		known[e.name] = true
		src, ok := sd[e.name]
		if !ok {
			if !e.zeroIfAbsent {
				missing = append(missing, fmt.Sprintf("%q", e.name))
			}
			continue
		}
		if !src.Shape().Equal(e.t.Shape()) {
			mismatched = append(mismatched, fmt.Sprintf("%q is %v in the state dict but %v in the module", e.name, src.Shape(), e.t.Shape()))
		}
	}
	var unexpected []string
	for name := range sd {
		if !known[name] {
			unexpected = append(unexpected, fmt.Sprintf("%q", name))
		}
	}
	sort.Strings(unexpected)

	var problems []string
	if strict && len(missing) > 0 {
		problems = append(problems, "missing keys "+firstFew(missing, ", "))
	}
	if strict && len(unexpected) > 0 {
		problems = append(problems, "unexpected keys "+firstFew(unexpected, ", "))
	}
	if len(mismatched) > 0 {
		problems = append(problems, "shape mismatch: "+firstFew(mismatched, "; "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("nn: load state dict: %s", strings.Join(problems, "; "))
	}
	for _, e := range entries {
		src, ok := sd[e.name]
		switch {
		case ok && !sameView(src, e.t):
			e.t.CopyFrom(src)
		case !ok && e.zeroIfAbsent:
			e.t.Fill(0)
		}
	}
	return nil
}

// firstFew joins the first three of list with sep and counts the rest, so
// that the error of a whole other model stays one readable line.
func firstFew(list []string, sep string) string {
	const few = 3
	if len(list) <= few {
		return strings.Join(list, sep)
	}
	return fmt.Sprintf("%s%s… (%d more)", strings.Join(list[:few], sep), sep, len(list)-few)
}

// sameView reports whether a and b are the same elements of one storage, as
// when a module loads its own state dict.
func sameView(a, b *tensor.Tensor) bool {
	return a.SharesStorage(b) && a.DType() == b.DType() && a.Offset() == b.Offset() && slices.Equal(a.Strides(), b.Strides())
}

// Save writes m's state dict to path as a safetensors file, atomically
// (the file holds either its old contents or the new ones), with the
// metadata {"format": "pt"} that PyTorch tooling expects.
func Save(path string, m Module) error {
	sd := StateDict(m)
	defer ReleaseAll(sd)
	if err := safetensors.SaveTensors(path, sd, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("nn: save: %w", err)
	}
	return nil
}

// Load reads a safetensors file written by Save (or by PyTorch's
// safetensors.torch.save_file) into m with LoadStateDict.
func Load(path string, m Module, strict bool) error {
	sd, err := safetensors.LoadTensors(path)
	if err != nil {
		return fmt.Errorf("nn: load: %w", err)
	}
	defer ReleaseAll(sd)
	if err := LoadStateDict(m, sd, strict); err != nil {
		return fmt.Errorf("%w (file %s)", err, path)
	}
	return nil
}
