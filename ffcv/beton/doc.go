// Package beton reads and writes FFCV's .beton dataset files (file format
// version 2), byte-compatible with the files FFCV's DatasetWriter writes
// and its Loader reads.
//
// # Format
//
// Little-endian throughout:
//
//	header       24 bytes: u16 version (2), u16 num_fields, u32 page_size,
//	             u64 num_samples, u64 alloc_table_ptr
//	descriptors  1041 bytes per field: u8 type id, u8[16] name (NUL-padded),
//	             u8[1024] type arguments
//	metadata     one row per sample
//	data pages   from the metadata's end rounded up to a page boundary
//	allocations  24 bytes per allocation, to the end of the file:
//	             u64 sample id, u64 pointer, u64 size
//
// A metadata row is the concatenation of the fields' metadata laid out as
// numpy lays out np.dtype([...], align=True): a float is an f64, an int an
// i64, an ndarray its data pointer (u64), bytes and JSON {u64 ptr, u64
// size}, and an RGB image the packed 13 bytes {u8 mode (0 JPEG, 1 raw), u16
// width, u16 height, u64 ptr}. The image and bytes structs align to 1 byte
// and the scalars to 8, so an {image, label} row is 24 bytes with the label
// at 16, and an {image, bytes} row is 29 bytes.
//
// An ndarray's arguments are its shape as u64[32] (unused dimensions 0),
// the length of its dtype description, and the description itself: numpy's
// dtype.descr as JSON, such as [["", "<f4"]]. A JSON field stores the
// text followed by a NUL byte. Pointers are absolute file offsets. All the
// data of one sample lies in one page; the size of a JPEG is found in the
// allocation table.
//
// FFCV's files carry no magic number or checksum, so Open checks every
// offset and size against the file and the page structure before trusting
// it, and fails with an error naming what is wrong ("beton: open x.beton:
// allocation table at 123 beyond file size 100"). No input makes the
// package panic or read out of bounds; FuzzOpen checks this.
//
// # Reading
//
// Open returns a Reader, safe for concurrent use, that serves the data of
// images, bytes, JSON and arrays as slices aliasing either a memory mapping
// of the file (MMap: the operating system's page cache, the default) or
// whole pages read with pread into a bounded cache (Process), which
// Prefetch fills in the background. Page tells which page holds a sample,
// for orders that read page by page.
//
// # Writing
//
// Write stores the samples of a Source with a list of fields: FloatField,
// IntField, RGBImageField, BytesField, NDArrayField and JSONField. Workers
// encode samples in parallel, but pages are packed in sample order exactly
// as FFCV's writer does with one worker, so the output depends only on the
// input and the options: raw images, numbers, bytes, arrays and JSON
// objects come out byte-identical to FFCV's files. (JPEGs differ in their
// bytes: FFCV encodes with OpenCV, Write with package ffcv/jpeg.) A sample
// whose data does not fit in a page is an error naming the sample and the
// size. The file appears atomically at its path when complete.
//
// Grayscale images (RGBImageField.Channels = 1) are a flock extension: the
// field's descriptor arguments hold {"channels":1}, which FFCV ignores.
package beton
