module example.com/charlm

go 1.26.0

require github.com/flockml/flock v0.0.0-00010101000000-000000000000

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	golang.org/x/sys v0.49.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)

replace github.com/flockml/flock => ../..
