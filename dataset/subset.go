package dataset

import (
	"embed"
	"fmt"
	"path"
)

// The Fashion-MNIST subset embedded in the package, so that a program
// trains on real images on a machine with no copy of the data set and no
// network. It is the first FashionMNISTSubsetTrainPerClass images of each
// class of the training file and the first FashionMNISTSubsetTestPerClass
// of each class of the test file, in the files' order: a balanced 6,000 and
// 2,000 images. The data set is © Zalando SE, released under the MIT
// licence (https://github.com/zalandoresearch/fashion-mnist).
const (
	FashionMNISTSubsetTrainPerClass = 600
	FashionMNISTSubsetTestPerClass  = 200
)

//go:embed fashionmnist/*.gz
var subsetFS embed.FS

// fashionMNISTSubsetFiles are the embedded files, gzip-compressed IDX, in
// the order of fashionMNISTFiles, with the SHA-256 of their IDX bytes.
var fashionMNISTSubsetFiles = [4]struct{ name, idxSHA256 string }{
	{"train-images-idx3-ubyte", "cf313073c7eb485392848071d5c433571d7166043e971e3345b095cc30518084"},
	{"train-labels-idx1-ubyte", "097b93fbcf9bd5bc648b1a457ddc55c9e4ab49afb33f9ecae8ce068399a75e3a"},
	{"t10k-images-idx3-ubyte", "15a92dd1e9b16ea361928086e77df4dfa890c255c00b5a8c8162c1040ce8eef1"},
	{"t10k-labels-idx1-ubyte", "234596aeb6eb48133ec99a62541f90bc0728c9559a681f1e0638037462458f2c"},
}

// FashionMNISTSubset returns the embedded subset of Fashion-MNIST: 6,000
// training and 2,000 test images, balanced over the ten classes (see
// FashionMNISTSubsetTrainPerClass). Its SHA-256 digests are checked.
func FashionMNISTSubset() (train, test *Images, err error) {
	var sets [2]*Images
	for s := range sets {
		var idx [2]*IDX
		for k := range idx {
			f := fashionMNISTSubsetFiles[2*s+k]
			r, err := subsetFS.Open(path.Join("fashionmnist", f.name+".gz"))
			if err != nil {
				return nil, nil, fmt.Errorf("dataset: Fashion-MNIST subset: %w", err)
			}
			idx[k], err = ReadIDX(r)
			r.Close()
			if err != nil {
				return nil, nil, fmt.Errorf("dataset: Fashion-MNIST subset: %s: %w", f.name, err)
			}
			if err := verifyIDX("embedded "+f.name, idx[k], f.idxSHA256); err != nil {
				return nil, nil, err
			}
		}
		m, err := NewImagesFromIDX(idx[0], idx[1], FashionMNISTClasses)
		if err != nil {
			return nil, nil, fmt.Errorf("dataset: Fashion-MNIST subset: %w", err)
		}
		sets[s] = m
	}
	return sets[0], sets[1], nil
}

// FirstPerClass returns the first k images of each class of m, in m's
// order, as a new set (fewer for a class that has fewer).
func (m *Images) FirstPerClass(k int) *Images {
	sz := m.H * m.W * m.C
	taken := make([]int, len(m.Classes))
	out := &Images{H: m.H, W: m.W, C: m.C, Classes: m.Classes}
	for i, l := range m.Labels {
		if taken[l] >= k {
			continue
		}
		taken[l]++
		out.Pixels = append(out.Pixels, m.Pixels[i*sz:(i+1)*sz]...)
		out.Labels = append(out.Labels, l)
		out.N++
	}
	return out
}
