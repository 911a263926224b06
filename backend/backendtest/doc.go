// Package backendtest is the conformance suite every flock backend runs:
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, mybackend.New()) }
//
// Each kernel is compared with a float64 reference written here in plain Go,
// on random inputs whose shapes include size 0 and 1, broadcasting corner
// cases, odd strides and sizes that do not divide evenly between threads.
// Results must agree within a tolerance per dtype (Tol).
package backendtest
