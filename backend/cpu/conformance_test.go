package cpu_test

import (
	"testing"

	"github.com/flockml/flock/backend/backendtest"
	"github.com/flockml/flock/backend/cpu"
)

func TestConformance(t *testing.T) { backendtest.Run(t, cpu.New()) }
