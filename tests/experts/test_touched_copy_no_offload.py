"""static-UVA at a budget that holds every layer (static plan with no offloaded layer): the graphed step path has
nothing to read from the host and runs every layer from its device copy, as the eager path does."""

import torch

from engine.bench.synthetic import synthetic_weights
from engine.experts.providers.touched_copy import TouchedCopyExperts
from engine.model.shapes import shape


def test_graphed_step_with_no_offloaded_layer_matches_the_eager_path():
    args = shape("qwen3-topology-tiny", 2)
    store = synthetic_weights(args, torch.device("cpu"), experts_on_host=False).store
    provider = TouchedCopyExperts(store, torch.device("cpu"), 0)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, args.hidden_size, generator=generator)
    ids = torch.randperm(args.num_experts, generator=generator)[: args.num_experts_per_tok].view(1, -1)
    weights = torch.softmax(torch.randn(ids.shape, generator=generator), dim=-1)
    eager = provider.forward(0, x, ids, weights)
    provider.graphed.begin_step(1, args.num_experts_per_tok)  # raised ValueError with no offloaded layer
    assert provider.graphed.reader is None
    assert torch.equal(provider.graphed.forward(0, x, ids, weights), eager)
