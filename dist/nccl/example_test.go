package nccl_test

import (
	"context"
	"fmt"

	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/nccl"
	"github.com/flockml/flock/tensor"
)

// A rank of a job started by torchrun, SLURM or `flock run` joins the NCCL
// communicator on its local GPU and sums a gradient with the other ranks.
// (It needs GPUs, so the example is compiled but not run.)
func ExampleInit() {
	env, err := dist.EnvFromOS()
	if err != nil {
		fmt.Println(err)
		return
	}
	gpu, err := cuda.New(env.LocalRank, cuda.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := nccl.Init(context.Background(), env, gpu, dist.InitOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	grad := tensor.Ones(tensor.Shape{1 << 20}, tensor.On(gpu))
	defer grad.Release()
	if err := c.AllReduce(context.Background(), grad, dist.Avg); err != nil {
		fmt.Println(err)
	}
}
