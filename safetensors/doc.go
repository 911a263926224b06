// Package safetensors reads and writes the safetensors format, the
// checkpoint format of Hugging Face's safetensors library, which PyTorch
// programs use to exchange weights.
//
// # Format
//
// A file is
//
//	[8 bytes]  N, the header length, unsigned little-endian
//	[N bytes]  a JSON object, UTF-8, padded with spaces
//	[rest]     the data region
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets"},
// where data_offsets [begin, end) locate the tensor's row-major
// little-endian bytes within the data region, and may hold one more key,
// "__metadata__", mapping strings to strings. The element types are the
// DType constants.
//
// # Validation
//
// Files come from anywhere, so Parse and Read check everything the reference
// implementation checks, and a little more, before trusting a byte: the
// header length against MaxHeaderSize and the file size, UTF-8, JSON
// syntax with nothing after the object, keys named once, known dtypes,
// non-negative extents whose product (and byte size) does not overflow,
// data_offsets that are ordered, match numel·size, and tile the data region
// exactly, with no gap, overlap or trailing byte. Each failure is an error
// naming the tensor ("safetensors: header: tensor "w": ..."); no input
// makes the package panic (FuzzRead checks this).
//
// # Writing
//
// Write and WriteFile produce the same bytes as the reference implementation
// for the same tensors: data ordered by decreasing alignment then name, and
// a header padded to a multiple of 8 bytes, so every tensor's data is
// aligned for its type when the file is mapped into memory. The output
// depends on nothing but the arguments. WriteFile replaces a file
// atomically.
//
// # Tensors
//
// Tensor is the raw level: a dtype name, a shape and bytes. FromTensor and
// Tensor.ToTensor convert to and from flock's tensor.Tensor, and
// LoadTensors and SaveTensors do so for whole files.
package safetensors
