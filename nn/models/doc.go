// Package models holds complete networks, built from package nn's layers and
// registered by name so that `flock train --model NAME` and `flock bench
// model` can ask for them:
//
//   - mlp and cnn, the small networks that train on Fashion-MNIST by default
//     (parameter names those of the equivalent PyTorch nn.Sequential);
//   - the ResNets of torchvision (resnet18/34/50/101/152, wide_resnet50_2;
//     NewResNet), with torchvision's state-dict keys, and the CIFAR ResNets
//     of He et al. (2016) (resnet20/32/44/56/110; NewCIFARResNet) with
//     parameter-free zero-padding shortcuts (option A) by default;
//   - Vision Transformers (vit_{tiny,small,base,large}_p{4,16,32}; NewViT)
//     with timm's state-dict keys, ConvertTorchvisionViT for weights
//     saved from torchvision's VisionTransformer and ConvertToTorchvisionViT
//     to export them under its names; ViTConfig takes the MLP width as
//     torchvision's mlp_dim (MLPDim) or as timm's mlp_ratio.
//
// A registered builder takes a Config (input channels, image size, classes,
// and the ResNets' options: stem, groups and width, zero-initialised
// residuals), so every network adapts to 1-channel 28×28 Fashion-MNIST
// images: the torchvision ResNets switch to a small-input stem (3×3
// convolution, stride 1, no max-pool) for sides up to SmallStemMaxSide
// unless Config.Stem chooses one, and the ViTs need a side divisible by
// their patch. Weights move between flock and PyTorch through
// safetensors files under the same names.
package models
