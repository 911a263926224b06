package cuda

import (
	"fmt"
)

// LibraryReport says whether a library was found, where, and its version.
type LibraryReport struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Report is what Probe finds on the machine.
type Report struct {
	Driver    LibraryReport   `json:"driver"`
	Devices   []DeviceInfo    `json:"devices"`
	Libraries []LibraryReport `json:"libraries"`
	// Error is why no GPU is usable ("" when one is).
	Error string `json:"error,omitempty"`
}

// Probe looks for the driver, the GPUs and the optional libraries, without
// opening a backend: what `flock doctor` prints.
func Probe() Report {
	var r Report
	r.Driver.Name = Driver.String()
	d, n, err := probeDriver()
	if err != nil {
		r.Error = err.Error()
		if lib, lerr := Open(Driver); lerr == nil {
			r.Driver.Path = lib.Path
		} else {
			r.Driver.Error = lerr.Error()
		}
	} else {
		r.Driver.Path = d.lib.Path
		var v int32
		if d.cuDriverGetVersion(&v) == cuSuccess {
			r.Driver.Version = fmt.Sprintf("CUDA %d.%d", v/1000, v%1000/10)
		}
		for i := 0; i < n; i++ {
			var dev int32
			if d.cuDeviceGet(&dev, int32(i)) != cuSuccess {
				continue
			}
			r.Devices = append(r.Devices, deviceInfo(d, i, dev))
		}
	}
	for _, l := range []Lib{CUBLAS, NVRTC, CUDNN, NCCL} {
		lr := LibraryReport{Name: l.String()}
		lib, err := Open(l)
		if err != nil {
			lr.Error = err.Error()
		} else {
			lr.Path = lib.Path
			lr.Version = libraryVersion(lib)
		}
		r.Libraries = append(r.Libraries, lr)
	}
	return r
}

// libraryVersion asks a library its version through a function that needs
// no handle or context.
func libraryVersion(lib *Library) string {
	switch lib.Lib {
	case CUBLAS:
		var get func(prop int32, v *int32) int32
		b := &Binder{Lib: lib}
		b.Bind(&get, "cublasGetProperty")
		if get == nil {
			return ""
		}
		var ma, mi, pa int32
		if get(0, &ma) != 0 || get(1, &mi) != 0 || get(2, &pa) != 0 {
			return ""
		}
		return fmt.Sprintf("%d.%d.%d", ma, mi, pa)
	case NVRTC:
		var ver func(ma, mi *int32) int32
		b := &Binder{Lib: lib}
		b.Bind(&ver, "nvrtcVersion")
		var ma, mi int32
		if ver == nil || ver(&ma, &mi) != 0 {
			return ""
		}
		return fmt.Sprintf("%d.%d", ma, mi)
	case CUDNN:
		var ver func() uint64
		b := &Binder{Lib: lib}
		b.Bind(&ver, "cudnnGetVersion")
		if ver == nil {
			return ""
		}
		return (&cudnn{cudnnGetVersion: ver}).Version()
	case NCCL:
		var ver func(v *int32) int32
		b := &Binder{Lib: lib}
		b.Bind(&ver, "ncclGetVersion")
		var v int32
		if ver == nil || ver(&v) != 0 {
			return ""
		}
		return NCCLVersionString(int(v))
	}
	return ""
}

// NCCLVersionString formats ncclGetVersion's code (major·10000 +
// minor·100 + patch since 2.9, major·1000 + minor·100 + patch before).
func NCCLVersionString(v int) string {
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}
