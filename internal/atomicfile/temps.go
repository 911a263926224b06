package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix is how the temporary files of writes to path begin: Write
// creates them as tempPrefix(base) followed by random digits.
func tempPrefix(base string) string { return "." + base + ".tmp" }

// RemoveTemps removes the temporary files that writes to path left behind
// when their process was killed before it could rename or remove them, and
// returns the names removed. It must not run while another Write to path
// is under way, whose temporary file it would take.
func RemoveTemps(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix(base))
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
