// Package tree holds tests of the module's source tree as a whole: the
// README's layout table against the imports, and what git tracks.
package tree

import (
	"bufio"
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/flockml/flock"

// root is the module's directory, two floors above this one.
const root = "../.."

// readFloors reads the table under the README's "## Layout": each row is a
// floor number and the packages on it, in backquotes.
func readFloors(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^\| (\d+) \| ([^|]+) \|`)
	name := regexp.MustCompile("`([^`]+)`")
	floors := map[string]int{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layout"
			continue
		}
		m := row.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, p := range name.FindAllStringSubmatch(m[2], -1) {
			if prev, ok := floors[p[1]]; ok {
				t.Errorf("README: %s stands on floors %d and %d", p[1], prev, n)
			}
			floors[p[1]] = n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(floors) == 0 {
		t.Fatal(`README: no layout table under "## Layout"`)
	}
	return floors
}

// packages returns the module's packages by relative path, as go build
// sees them (test files apart).
func packages(t *testing.T) map[string]*build.Package {
	t.Helper()
	pkgs := map[string]*build.Package{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
			return filepath.SkipDir // a module of its own (examples/…)
		}
		p, err := build.ImportDir(path, 0)
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(p.GoFiles) == 0 {
			return nil // tests only, as this package
		}
		rel, _ := filepath.Rel(root, path)
		pkgs[filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s", len(pkgs), root)
	}
	return pkgs
}

// moduleImports returns the packages of the module that p's non-test files
// import, by relative path.
func moduleImports(p *build.Package) []string {
	var mine []string
	for _, imp := range p.Imports {
		if imp == module || strings.HasPrefix(imp, module+"/") {
			mine = append(mine, strings.TrimPrefix(imp, module+"/"))
		}
	}
	return mine
}

// TestLayers checks that every package of the module has a floor in the
// README and imports only packages on lower floors, and that the README
// names no package that does not exist.
func TestLayers(t *testing.T) {
	t.Parallel()
	floors := readFloors(t)
	pkgs := packages(t)
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	}) {
		fl, ok := floors[p]
		if !ok {
			t.Errorf("%s has no floor in the README's layout table", p)
			continue
		}
		for _, imp := range moduleImports(pkgs[p]) {
			if fi, ok := floors[imp]; ok && fi >= fl {
				t.Errorf("%s (floor %d) imports %s (floor %d): a package imports only lower floors", p, fl, imp, fi)
			}
		}
	}
	for p := range floors {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("README's layout table names %s, which is not a package of the module", p)
		}
	}
}
