package ffcv

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif"  // registered for image.Decode
	_ "image/jpeg" // registered for image.Decode
	_ "image/png"  // registered for image.Decode
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
)

// ArraySource is a beton.Source over images held in memory as one
// N×H×W×C uint8 array (Fashion-MNIST's 28×28×1, CIFAR's 32×32×3) with a
// label per image. Its fields are "image" and "label" (Fields).
type ArraySource struct {
	// Pixels holds the images in NHWC order, N·H·W·C bytes.
	Pixels     []uint8
	N, H, W, C int
	// Labels holds N labels.
	Labels []int64
	// AsArray stores the images as an NDArrayField of uint8 (H, W) when
	// C = 1, (H, W, C) otherwise, as FFCV's own Fashion-MNIST files do;
	// otherwise they are an RGBImageField with the Image settings
	// (1-channel images are a flock extension of FFCV's format).
	AsArray bool
	// Image sets the image field (Channels is set from C).
	Image beton.RGBImageField
}

// NewImagesSource returns an ArraySource over m (for example
// dataset.LoadFashionMNIST's sets), sharing its pixels.
func NewImagesSource(m *dataset.Images) (*ArraySource, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("ffcv: source: %w", err)
	}
	s := &ArraySource{Pixels: m.Pixels, N: m.N, H: m.H, W: m.W, C: m.C, Labels: make([]int64, m.N)}
	for i, l := range m.Labels {
		s.Labels[i] = int64(l)
	}
	return s, nil
}

func (s *ArraySource) check() error {
	if s.N < 0 || s.H <= 0 || s.W <= 0 || (s.C != 1 && s.C != 3) {
		return fmt.Errorf("ffcv: source: %d images of %d×%d×%d: want N ≥ 0, H, W > 0 and 1 or 3 channels", s.N, s.H, s.W, s.C)
	}
	if len(s.Pixels) != s.N*s.H*s.W*s.C || len(s.Labels) != s.N {
		return fmt.Errorf("ffcv: source: %d pixel bytes and %d labels for %d images of %d×%d×%d", len(s.Pixels), len(s.Labels), s.N, s.H, s.W, s.C)
	}
	return nil
}

// Fields returns the source's fields: "image" and "label".
func (s *ArraySource) Fields() []beton.NamedField {
	var img beton.Field
	if s.AsArray {
		shape := []int{s.H, s.W}
		if s.C != 1 {
			shape = append(shape, s.C)
		}
		img = beton.NDArrayField{DType: "|u1", Shape: shape}
	} else {
		f := s.Image
		f.Channels = s.C
		img = f
	}
	return []beton.NamedField{{Name: "image", Field: img}, {Name: "label", Field: beton.IntField{}}}
}

// Len returns the number of images.
func (s *ArraySource) Len() int { return s.N }

// Sample sets out[0] to image i (a view of Pixels) and out[1] to its label.
func (s *ArraySource) Sample(i int, out []any) error {
	if err := s.check(); err != nil {
		return err
	}
	n := s.H * s.W * s.C
	pix := s.Pixels[i*n : (i+1)*n : (i+1)*n]
	if s.AsArray {
		out[0] = pix
	} else {
		out[0] = transform.ImageOf(pix, s.W, s.H, s.C)
	}
	out[1] = s.Labels[i]
	return nil
}

// imageExtensions are the file extensions of torchvision's
// IMG_EXTENSIONS, and whether this package decodes them.
var imageExtensions = map[string]bool{
	".jpg": true, ".jpeg": true, ".png": true, ".gif": true,
	".ppm": false, ".bmp": false, ".pgm": false, ".tif": false, ".tiff": false, ".webp": false,
}

// ImageFolderSource is a beton.Source over a directory tree with one
// subdirectory per class, as torchvision's ImageFolder: the classes are
// the subdirectories' names in sorted order, labelled 0, 1, …; the samples
// are the image files found under each class directory (recursively, in
// sorted order, symbolic links followed), class after class. JPEG, PNG and
// GIF files are decoded and converted to RGB (grayscale replicated, alpha
// dropped, as PIL's convert("RGB")); other image formats of torchvision's
// list make NewImageFolderSource fail. JPEGs are decoded by the pure-Go
// decoder so the file written does not depend on the machine. An image
// whose header claims more than MaxPixels pixels is refused before anything
// is allocated for it: a few hundred bytes of JPEG can claim 60000×60000.
type ImageFolderSource struct {
	// Root is the tree's directory.
	Root string
	// Classes are the class names, indexed by label.
	Classes []string
	// Files are the samples' paths and Labels their classes.
	Files  []string
	Labels []int64
	// Image sets the image field (3 channels).
	Image beton.RGBImageField
	// MaxPixels is the most pixels (width·height) an image may have; 0
	// lifts the limit. NewImageFolderSource sets DefaultMaxPixels.
	MaxPixels int

	decoders sync.Pool
}

// DefaultMaxPixels is the pixel limit of an ImageFolderSource: PIL's
// Image.MAX_IMAGE_PIXELS (about 9459² or 12288×7282), 256 MiB of RGB.
const DefaultMaxPixels = 89478485

// NewImageFolderSource lists the tree under root.
func NewImageFolderSource(root string, image beton.RGBImageField) (*ImageFolderSource, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("ffcv: image folder: %w", err)
	}
	s := &ImageFolderSource{Root: root, Image: image, MaxPixels: DefaultMaxPixels}
	for _, e := range entries {
		if isDir(filepath.Join(root, e.Name()), e) {
			s.Classes = append(s.Classes, e.Name())
		}
	}
	slices.Sort(s.Classes)
	if len(s.Classes) == 0 {
		return nil, fmt.Errorf("ffcv: image folder %s: no class directories (want one subdirectory per class)", root)
	}
	unsupported := map[string]int{}
	for label, class := range s.Classes {
		err := walkSorted(filepath.Join(root, class), func(path string) {
			ext := strings.ToLower(filepath.Ext(path))
			ok, known := imageExtensions[ext]
			switch {
			case ok:
				s.Files = append(s.Files, path)
				s.Labels = append(s.Labels, int64(label))
			case known:
				unsupported[ext]++
			}
		})
		if err != nil {
			return nil, fmt.Errorf("ffcv: image folder: %w", err)
		}
	}
	if len(unsupported) > 0 {
		var parts []string
		for _, ext := range slices.Sorted(func(yield func(string) bool) {
			for k := range unsupported {
				if !yield(k) {
					return
				}
			}
		}) {
			parts = append(parts, fmt.Sprintf("%d %s", unsupported[ext], ext))
		}
		return nil, fmt.Errorf("ffcv: image folder %s: %s files cannot be decoded (JPEG, PNG and GIF can): convert them first", root, strings.Join(parts, ", "))
	}
	if len(s.Files) == 0 {
		return nil, fmt.Errorf("ffcv: image folder %s: no image files (.jpg, .jpeg, .png, .gif) under %d class directories", root, len(s.Classes))
	}
	s.decoders.New = func() any { return jpeg.NewGoDecoder() }
	return s, nil
}

func isDir(path string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink != 0 {
		st, err := os.Stat(path)
		return err == nil && st.IsDir()
	}
	return false
}

// walkSorted calls visit for every non-directory entry under dir, entries
// of a directory in sorted order, following symbolic links to directories.
func walkSorted(dir string, visit func(path string)) error {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if isDir(p, e) {
			if err := walkSorted(p, visit); err != nil {
				return err
			}
			continue
		}
		visit(p)
	}
	return nil
}

// Fields returns the source's fields: "image" and "label".
func (s *ImageFolderSource) Fields() []beton.NamedField {
	f := s.Image
	f.Channels = 3
	return []beton.NamedField{{Name: "image", Field: f}, {Name: "label", Field: beton.IntField{}}}
}

// Len returns the number of images.
func (s *ImageFolderSource) Len() int { return len(s.Files) }

// Sample reads and decodes image i into out[0] (a transform.Image) and
// sets out[1] to its label.
func (s *ImageFolderSource) Sample(i int, out []any) error {
	data, err := os.ReadFile(s.Files[i])
	if err != nil {
		return fmt.Errorf("ffcv: image folder: %w", err)
	}
	img, err := s.decode(data)
	if err != nil {
		return fmt.Errorf("ffcv: image folder: %s: %w", s.Files[i], err)
	}
	out[0], out[1] = img, s.Labels[i]
	return nil
}

// checkPixels refuses a w×h image over the pixel limit.
func (s *ImageFolderSource) checkPixels(w, h int) error {
	if s.MaxPixels > 0 && int64(w)*int64(h) > int64(s.MaxPixels) {
		return fmt.Errorf("%d×%d image exceeds the pixel limit of %d (a decompression bomb, or raise the limit)", w, h, s.MaxPixels)
	}
	return nil
}

func (s *ImageFolderSource) decode(data []byte) (transform.Image, error) {
	if w, h, comps, err := jpeg.DecodeConfig(data); err == nil {
		if err := s.checkPixels(w, h); err != nil {
			return transform.Image{}, err
		}
		d := s.decoders.Get().(*jpeg.Decoder)
		defer s.decoders.Put(d)
		img := transform.NewImage(w, h, comps)
		if err := d.Decode(img, data, 1); err == nil {
			if comps == 1 {
				return grayToRGB(img), nil
			}
			return img, nil
		}
		// Left to image/jpeg below (for example a progressive file).
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return transform.Image{}, err
	}
	if err := s.checkPixels(cfg.Width, cfg.Height); err != nil {
		return transform.Image{}, err
	}
	m, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return transform.Image{}, err
	}
	return toRGB(m), nil
}

func grayToRGB(g transform.Image) transform.Image {
	out := transform.NewImage(g.Width, g.Height, 3)
	for y := range g.Height {
		src, dst := g.Row(y), out.Row(y)
		for x, v := range src {
			dst[3*x], dst[3*x+1], dst[3*x+2] = v, v, v
		}
	}
	return out
}

// toRGB converts a decoded image to 8-bit RGB, dropping alpha without
// compositing (PIL's convert("RGB")).
func toRGB(m image.Image) transform.Image {
	b := m.Bounds()
	out := transform.NewImage(b.Dx(), b.Dy(), 3)
	switch m := m.(type) {
	case *image.Gray:
		for y := range b.Dy() {
			row := out.Row(y)
			for x := range b.Dx() {
				v := m.GrayAt(b.Min.X+x, b.Min.Y+y).Y
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
		return out
	case *image.NRGBA:
		for y := range b.Dy() {
			row, src := out.Row(y), m.Pix[y*m.Stride:]
			for x := range b.Dx() {
				copy(row[3*x:3*x+3], src[4*x:4*x+3])
			}
		}
		return out
	}
	// Other models: through non-premultiplied RGBA.
	n := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(n, n.Bounds(), m, b.Min, draw.Src)
	return toRGB(n)
}
