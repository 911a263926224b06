// Package nn builds models out of layers: modules that own named
// parameters and buffers, the layers of image and sequence models, losses,
// PyTorch's initialisations, and state dicts stored as safetensors files.
//
// # Modules
//
// A Module owns parameters (autograd Vars that require gradients), buffers
// (tensors such as batch norm's running statistics) and sub-modules. Types
// become modules by embedding Base and registering their parts in their
// constructor with RegisterParameter, RegisterBuffer and RegisterModule. The
// dotted path of a part ("features.0.weight", "bn1.running_mean") is its
// name, in registration order — PyTorch's names and order when a model
// registers its parts as the PyTorch model assigns its attributes — so that
// checkpoints move between flock and PyTorch both ways. Train and Eval
// switch a module tree between training and evaluation behaviour (dropout,
// batch statistics); they never change the parameters.
//
// A Layer is a module with one input: Forward takes a Var and returns a new
// Var, which the caller releases once it is no longer needed (the recorded
// graph keeps what the backward pass needs). Layers: Linear, Conv2d,
// BatchNorm2d, LayerNorm, Dropout, ReLU, GELU, MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d, Flatten, Identity, Sequential, Embedding and
// MultiheadAttention. Losses (CrossEntropyLoss, MSELoss) are values whose
// Forward takes the prediction and the target.
//
// # Initialisation
//
// Constructors draw their initial parameters from a *tensor.Generator, so a
// model is a function of its seed, and use PyTorch's default distributions:
// Kaiming-uniform with a = √5 for Linear and Conv2d weights (U(±1/√fanIn)),
// U(±1/√fanIn) for their biases, N(0, 1) for embeddings, Xavier-uniform for
// attention's input projection, ones and zeros for normalisation. The
// functions KaimingUniform, KaimingNormal, XavierUniform, XavierNormal,
// TruncNormal, Uniform, Normal, Constant, Zeros and Ones re-initialise any
// tensor in place. Optional tensor.Options choose the dtype (float32 by
// default) and device of a layer's parameters.
//
// # State dicts
//
// StateDict maps names to tensors sharing the module's storage;
// LoadStateDict copies a map into the module in place, so optimisers that
// hold the parameters keep working. Loading is all or nothing: a shape
// mismatch is always an error, and in strict mode missing and unexpected
// keys are too, each named in the message. Save and Load store a state dict
// as a safetensors file (written atomically), readable by PyTorch's
// safetensors loader.
//
// # Memory
//
// A module owns its parameters and buffers; Release frees them. Forward
// passes release every intermediate they create.
package nn
