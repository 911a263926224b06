package cuda

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/flockml/flock/backend"
)

// The driver is probed once, when the package is initialised: opening
// libcuda.so.1, cuInit and counting the devices. Only when a device exists
// are "cuda" and "cuda:<i>" registered, so that programs on machines
// without a GPU see no cuda backend and every test that needs one skips.
var probe struct {
	once    sync.Once
	drv     *driver
	devices int
	err     error
}

func probeDriver() (*driver, int, error) {
	probe.once.Do(func() {
		lib, err := Open(Driver)
		if err != nil {
			probe.err = err
			return
		}
		d, err := bindDriver(lib)
		if err != nil {
			probe.err = err
			return
		}
		if err := d.check("cuInit", d.cuInit(0)); err != nil {
			probe.err = fmt.Errorf("cuda: driver %s: %w", lib.Path, err)
			return
		}
		var n int32
		if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
			probe.err = err
			return
		}
		if n == 0 {
			probe.err = fmt.Errorf("cuda: driver %s found no GPU", lib.Path)
			return
		}
		probe.drv, probe.devices = d, int(n)
	})
	return probe.drv, probe.devices, probe.err
}

// Available reports whether a CUDA driver and at least one GPU are present,
// and why not otherwise ("no CUDA driver found (tried ...)").
func Available() (bool, error) {
	_, _, err := probeDriver()
	return err == nil, err
}

// DeviceCount is the number of GPUs the driver sees (0 without a driver).
func DeviceCount() int {
	_, n, _ := probeDriver()
	return n
}

var opened struct {
	sync.Mutex
	backends map[int]*Backend
}

// New opens GPU ordinal with the given options. Each ordinal has one
// Backend per process (the one the registry hands out as "cuda:<i>"): a
// later call returns the same one, with its options changed to opts.
func New(ordinal int, opts Options) (*Backend, error) {
	b, err := get(ordinal)
	if err != nil {
		return nil, err
	}
	return b, b.SetOptions(opts)
}

// get returns the Backend of GPU ordinal, opening it with default options
// on first use.
func get(ordinal int) (*Backend, error) {
	d, n, err := probeDriver()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: no GPU %d (the driver sees %d)", ordinal, n)
	}
	opened.Lock()
	defer opened.Unlock()
	if b, ok := opened.backends[ordinal]; ok {
		return b, nil
	}
	dev, err := openDevice(d, ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: open GPU %d: %w", ordinal, err)
	}
	b := newBackend(ordinal, dev, Options{})
	b.initLibraries()
	if opened.backends == nil {
		opened.backends = map[int]*Backend{}
	}
	opened.backends[ordinal] = b
	return b, nil
}

// initLibraries opens cuBLAS and cuDNN for a real device; a missing library
// leaves its kernels to the backend's own.
func (b *Backend) initLibraries() {
	leave, err := b.eng.enter()
	if err != nil {
		b.blasErr, b.dnnErr = err, err
		return
	}
	defer leave()
	if c, err := loadCUBLAS(); err != nil {
		b.blasErr = err
	} else if err := c.init(b.eng.computeStream(), b.opts.TF32); err != nil {
		b.blasErr = err
	} else {
		b.blas, b.blasErr = c, nil
	}
	if c, err := loadCUDNN(); err != nil {
		b.dnnErr = err
	} else if err := c.init(b.eng.computeStream()); err != nil {
		b.dnnErr = err
	} else {
		b.dnn, b.dnnErr = c, nil
	}
}

// Libraries reports, for an opened backend, which optional libraries it
// uses: name → version, or the error that kept it out.
func (b *Backend) Libraries() map[string]string {
	out := map[string]string{}
	if b.blas != nil {
		out[CUBLAS.String()] = b.blas.Version()
	} else {
		out[CUBLAS.String()] = b.blasErr.Error()
	}
	if b.dnn != nil {
		out[CUDNN.String()] = b.dnn.Version()
	} else {
		out[CUDNN.String()] = b.dnnErr.Error()
	}
	return out
}

func init() {
	_, n, err := probeDriver()
	if err != nil {
		return
	}
	backend.Register(Name, func() (backend.Backend, error) { return get(0) })
	for i := 0; i < n; i++ {
		backend.Register(Name+":"+strconv.Itoa(i), func() (backend.Backend, error) { return get(i) })
	}
}
