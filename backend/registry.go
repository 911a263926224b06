package backend

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory opens a backend. It returns an error (not a panic) when the device
// is absent, such as a GPU backend on a machine without a driver.
type Factory func() (Backend, error)

var registry struct {
	sync.Mutex
	factories map[string]Factory
	open      map[string]Backend
}

// Register makes a backend available under name. It panics if name is taken,
// as two packages claiming one name is a programming error.
func Register(name string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if registry.factories == nil {
		registry.factories = map[string]Factory{}
		registry.open = map[string]Backend{}
	}
	if _, dup := registry.factories[name]; dup {
		panic("backend: Register called twice for " + name)
	}
	registry.factories[name] = f
}

// Get returns the backend registered as name, opening it on first use. Later
// calls return the same Backend.
func Get(name string) (Backend, error) {
	registry.Lock()
	defer registry.Unlock()
	if b, ok := registry.open[name]; ok {
		return b, nil
	}
	f, ok := registry.factories[name]
	if !ok {
		return nil, fmt.Errorf("backend: no backend named %q (registered: %s)", name, strings.Join(namesLocked(), ", "))
	}
	b, err := f()
	if err != nil {
		return nil, fmt.Errorf("backend: open %s: %w", name, err)
	}
	registry.open[name] = b
	return b, nil
}

// Names lists the registered backends in sorted order.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	names := make([]string, 0, len(registry.factories))
	for n := range registry.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
