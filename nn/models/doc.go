// Package models holds complete networks, built from package nn's layers and
// registered by name so that `flock train --model NAME` and benchmarks can
// ask for them: the MLP and small CNN that train on Fashion-MNIST by default.
// Parameter names match the equivalent PyTorch nn.Sequential, so weights move
// between the two through safetensors files.
package models
