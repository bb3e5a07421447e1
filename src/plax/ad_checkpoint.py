"""plax.ad_checkpoint: checkpointing (as ``jax.ad_checkpoint``)."""
from plax.higher_order.remat import (checkpoint, checkpoint_name, checkpoint_policies,  # noqa: F401
                                   remat)
from plax.transforms.residuals import print_saved_residuals, saved_residuals  # noqa: F401
