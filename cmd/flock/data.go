package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/flockml/flock/dataset"
)

// fashionMNISTURL is the mirror the commands download from ("": the
// data set's own).
var fashionMNISTURL = ""

// fashionMNIST finds the Fashion-MNIST sets for command cmd: the full set
// from dir or the searched directories, else downloaded when download
// allows, else (with no dir named) the subset embedded in the program,
// which one line on stderr announces with the ways to get the full set.
func fashionMNIST(ctx context.Context, cmd, dir string, download bool, progress, stderr io.Writer) (train, test *dataset.Images, subset bool, err error) {
	opts := dataset.FashionMNISTOptions{Dir: dir, BaseURL: fashionMNISTURL, Progress: progress, Logger: commandLogger(stderr, cmd)}
	train, test, err = dataset.LoadFashionMNIST(ctx, opts)
	if !errors.Is(err, dataset.ErrNotFound) {
		return train, test, false, err
	}
	why := "not found"
	if download {
		opts.Download = true
		train, test, err = dataset.LoadFashionMNIST(ctx, opts)
		if err == nil || ctx.Err() != nil || dir != "" {
			return train, test, false, err
		}
		cause := err
		for u := errors.Unwrap(cause); u != nil; u = errors.Unwrap(cause) {
			cause = u
		}
		why = fmt.Sprintf("not found and not downloaded (%v)", cause)
	}
	if dir != "" {
		return nil, nil, false, err
	}
	train, test, serr := dataset.FashionMNISTSubset()
	if serr != nil {
		return nil, nil, false, errors.Join(err, serr)
	}
	fmt.Fprintf(stderr, "%s: Fashion-MNIST %s: using the subset embedded in flock (%d training, %d test images); for the full set: apt-get install dataset-fashion-mnist, --data DIR, or a network\n",
		cmd, why, train.N, test.N)
	return train, test, true, nil
}
