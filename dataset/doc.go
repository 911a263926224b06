// Package dataset reads image classification data sets into memory and cuts
// them into batches of tensors.
//
// # Images
//
// An Images holds N labelled images as uint8 pixels in NHWC order with int32
// labels and class names. It is the in-memory form every reader here
// produces and every Loader consumes; Validate checks that its sizes and
// labels agree.
//
// # Fashion-MNIST
//
// LoadFashionMNIST returns the Fashion-MNIST training (60000) and test
// (10000) sets of 28×28 grey-level images in ten classes. It looks for the
// four IDX files, raw or gzip-compressed, in $FLOCK_DATA/fashion-mnist, then
// in the user cache directory (os.UserCacheDir()/flock/fashion-mnist), then
// where the Debian package dataset-fashion-mnist installs them
// (/usr/share/datasets/fashion-mnist). When none holds all four it can
// download them (FashionMNISTOptions.Download) from the dataset's mirror into
// the cache, checking each file's SHA-256 before it is renamed into place.
//
// FashionMNISTSubset returns a subset embedded in the package (3.4 MB), for
// machines with neither the files nor a network: the first 600 images of
// each class of the training file and the first 200 of each class of the
// test file, in the files' order (6,000 and 2,000 images). The SHA-256
// digests of its IDX bytes, checked as it is read, are
//
//	train-images-idx3-ubyte  cf313073c7eb485392848071d5c433571d7166043e971e3345b095cc30518084
//	train-labels-idx1-ubyte  097b93fbcf9bd5bc648b1a457ddc55c9e4ab49afb33f9ecae8ce068399a75e3a
//	t10k-images-idx3-ubyte   15a92dd1e9b16ea361928086e77df4dfa890c255c00b5a8c8162c1040ce8eef1
//	t10k-labels-idx1-ubyte   234596aeb6eb48133ec99a62541f90bc0728c9559a681f1e0638037462458f2c
//
// and its test checks, where the full files are installed, that it is what
// the rule above takes from them. Fashion-MNIST is © Zalando SE, under the
// MIT licence.
//
// # CIFAR
//
// LoadCIFAR returns the CIFAR-10 or CIFAR-100 (fine labels) training (50000)
// and test (10000) sets of 32×32 RGB images from the binary or the python
// version its authors publish, read from the .tar.gz archive or its
// extracted files in a directory; it can download the binary archive
// (CIFAROptions.Download), checking its SHA-256 before it is renamed into
// place. The python version's pickles are read by a restricted decoder that
// builds only dicts, lists, strings, ints and numpy uint8 arrays and calls
// no code: any other global a pickle names is an error.
//
// # IDX files
//
// ReadIDX and WriteIDX decode and encode the IDX format of the MNIST family:
// a magic number giving the element type and the number of dimensions, the
// big-endian dimensions, then the elements. ReadIDX accepts gzip-compressed
// input and rejects anything that is not exactly one well-formed array, so it
// can be given untrusted bytes.
//
// # Batches
//
// A Loader walks an Images epoch by epoch in batches. Each batch holds the
// images as a float32 tensor [B, C, H, W] normalised as (p/255 − mean)/std
// (Fashion-MNIST's mean 0.2860 and standard deviation 0.3530 by default) and
// the labels as an int64 tensor [B]. The order of an epoch is a pure function
// of the seed and the epoch number, each of World ranks sees a disjoint equal
// share of it, and a Position (epoch, batch) saved mid-epoch resumes the
// stream exactly; see Loader for the permutation and sharding rules.
package dataset
