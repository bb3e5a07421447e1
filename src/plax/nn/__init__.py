"""plax.nn: neural-network building blocks, as in ``jax.nn``: activation functions, softmax
and its relatives, standardize, one_hot, dot_product_attention, and the weight
initializers in ``plax.nn.initializers``."""
from plax.nn.functions import (  # noqa: F401
    identity, relu, relu6, sigmoid, log_sigmoid, softplus, soft_sign, silu, swish, gelu, elu,
    selu, celu, leaky_relu, hard_tanh, hard_sigmoid, hard_silu, hard_swish, mish, squareplus,
    sparse_plus, sparse_sigmoid, glu, tanh, logsumexp, logmeanexp, log_softmax, softmax,
    standardize, one_hot, log1mexp)
from plax.nn.attention import dot_product_attention  # noqa: F401
from plax.nn.scaled import (  # noqa: F401
    get_scaled_dot_general_config, scaled_dot_general, scaled_matmul)
from plax.nn import initializers  # noqa: F401
