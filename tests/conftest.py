"""Settings shared by the whole test suite."""

import torch

# The test models are tiny: intra-op threads gain nothing, and on a busy 2-core machine OpenMP's waiting
# threads slow small operations down by up to two orders of magnitude (seen: 0.7 s -> 70 s for a Trainer run).
torch.set_num_threads(1)
