"""plax.ad_checkpoint: checkpointing (as ``jax.ad_checkpoint``)."""
from plax.higher_order.remat import (Offloadable, Recompute, Saveable, checkpoint,  # noqa: F401
                                     checkpoint_name, checkpoint_policies, remat)
from plax.transforms.residuals import print_saved_residuals, saved_residuals  # noqa: F401
