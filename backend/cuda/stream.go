package cuda

import (
	"errors"
	"sync"
)

// Streams and events for code that queues work of its own beside the
// backend's (NCCL collectives on a communication stream, ordered against
// the compute stream by events).

var errNoDevice = errors.New("cuda: streams and events need a GPU")

func (b *Backend) real() (*realDevice, error) {
	r, ok := b.eng.(*realDevice)
	if !ok {
		return nil, errNoDevice
	}
	return r, nil
}

// Stream is a CUDA stream of a backend's device.
type Stream struct {
	b    *Backend
	h    uintptr
	once sync.Once
}

// NewStream creates a stream that does not synchronise with the legacy
// default stream.
func (b *Backend) NewStream() (*Stream, error) {
	r, err := b.real()
	if err != nil {
		return nil, err
	}
	s := &Stream{b: b}
	err = r.call(func() error { return r.d.check("cuStreamCreate", r.d.cuStreamCreate(&s.h, streamNonBlocking)) })
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Handle is the CUstream.
func (s *Stream) Handle() uintptr { return s.h }

// Synchronize waits for the work queued on s.
func (s *Stream) Synchronize() error {
	r, err := s.b.real()
	if err != nil {
		return err
	}
	return r.call(func() error { return r.d.check("cuStreamSynchronize", r.d.cuStreamSynchronize(s.h)) })
}

// Destroy waits for the stream's work and releases it. Buffers that the
// stream used (RecordStream) forget it first, so that freeing them later
// records no event on the destroyed stream.
func (s *Stream) Destroy() error {
	var err error
	s.once.Do(func() {
		r, e := s.b.real()
		if e != nil {
			err = e
			return
		}
		err = r.call(func() error {
			serr := r.d.check("cuStreamSynchronize", r.d.cuStreamSynchronize(s.h))
			s.b.mem.forgetStream(s.h)
			if derr := r.d.check("cuStreamDestroy", r.d.cuStreamDestroy(s.h)); serr == nil {
				serr = derr
			}
			return serr
		})
	})
	return err
}

// Event marks a point in a stream's queue.
type Event struct {
	b    *Backend
	h    uintptr
	once sync.Once
}

// NewEvent creates an event without timing.
func (b *Backend) NewEvent() (*Event, error) {
	r, err := b.real()
	if err != nil {
		return nil, err
	}
	e := &Event{b: b}
	err = r.call(func() error { return r.d.check("cuEventCreate", r.d.cuEventCreate(&e.h, eventDisableTiming)) })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Record marks the current end of stream's queue (a CUstream; the
// backend's Stream() for the compute stream).
func (e *Event) Record(stream uintptr) error {
	r, err := e.b.real()
	if err != nil {
		return err
	}
	return r.call(func() error { return r.d.check("cuEventRecord", r.d.cuEventRecord(e.h, stream)) })
}

// Done reports whether the work before the recorded point has finished.
func (e *Event) Done() (bool, error) {
	r, err := e.b.real()
	if err != nil {
		return false, err
	}
	return r.done(e.h)
}

// Wait makes later work on stream wait for the event, without blocking the
// host.
func (e *Event) Wait(stream uintptr) error {
	r, err := e.b.real()
	if err != nil {
		return err
	}
	return r.call(func() error { return r.d.check("cuStreamWaitEvent", r.d.cuStreamWaitEvent(stream, e.h, 0)) })
}

// Destroy releases the event.
func (e *Event) Destroy() {
	e.once.Do(func() {
		if r, err := e.b.real(); err == nil {
			r.destroy(e.h)
		}
	})
}
