// Package tensorboard writes TensorBoard event files of scalars, in pure
// Go: a run's loss, accuracy or learning rate by step, for TensorBoard's
// Scalars dashboard (tensorboard --logdir DIR).
//
// # The file
//
// An event file is a sequence of TFRecords, each one serialized Event
// protocol buffer:
//
//	uint64 length | uint32 masked CRC-32C(length) | data | uint32 masked CRC-32C(data)
//
// all little-endian, where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8
// (mod 2³²) over the CRC-32C (Castagnoli) of the bytes. The first Event of
// a file carries only its wall time and file_version "brain.Event:2"; each
// later one a wall time, a step and a Summary whose Values pair a tag with a
// simple_value, a float32. The protocol buffers are encoded here by hand,
// as protoc's encoders would (fields in number order, proto3 zero values
// left out, the Value's simple_value always present since it is a member
// of a oneof), so that the package imports nothing but the standard
// library and builds without cgo.
//
// # Writer
//
// Create opens a new file in a directory, named as TensorFlow names them,
// events.out.tfevents.<unix seconds>.<hostname>.<pid>.<sequence>, so that
// TensorBoard orders a directory's files by when they were started and two
// writers never share a file. Writer.Scalar and Writer.Scalars append
// events to a buffer; Flush hands it to the operating system, so that a
// TensorBoard watching the directory sees them; Close flushes, syncs the
// file to disk and closes it. A Writer is safe for concurrent use.
//
// Values are float32 in the file: a float64 beyond float32's range
// becomes ±Inf, and NaN and ±Inf are written as they are (TensorBoard
// reads and shows them), so that a diverged run's log says it diverged
// rather than stopping short.
package tensorboard
