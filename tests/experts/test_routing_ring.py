"""engine.experts.routing.routing_ring: the routed ids of graphed decode steps, kept on the device until drained."""

import torch

from engine.experts.routing.routing_ring import RoutingRing


def test_every_recorded_step_drains_in_order_and_a_full_ring_drains_itself():
    drained = []
    ring = RoutingRing([3, 7], torch.device("cpu"), on_full=lambda: drained.extend(ring.drain()), capacity=4)
    steps = [torch.randint(0, 16, (tokens, 2)) for tokens in (1, 1, 2, 1, 2, 1)]  # two batch shapes interleaved
    for step, ids in enumerate(steps):
        ring.begin_step(*ids.shape)
        ring.record(3, ids)
        ring.record(7, ids + 100)
    drained += ring.drain()
    assert [layer for layer, _ in drained] == [3, 7] * len(steps)
    for step, ids in enumerate(steps):
        assert torch.equal(torch.from_numpy(drained[2 * step][1]), ids)
        assert torch.equal(torch.from_numpy(drained[2 * step + 1][1]), ids + 100)
    assert ring.drain() == []


def test_recording_leaves_the_other_rows_alone():
    ring = RoutingRing([0], torch.device("cpu"), on_full=lambda: None, capacity=3)
    first, second = torch.tensor([[1, 2]]), torch.tensor([[5, 6]])
    ring.begin_step(1, 2)
    ring.record(0, first)
    ring.begin_step(1, 2)
    ring.record(0, second)
    assert [ids.tolist() for _, ids in ring.drain()] == [[[1, 2]], [[5, 6]]]


def test_drained_uses_are_each_steps_unique_experts_summed_per_layer():
    import numpy as np

    ring = RoutingRing([3, 7], torch.device("cpu"), on_full=lambda: None, capacity=8)
    generator = torch.Generator().manual_seed(0)
    steps = [torch.randint(-1, 6, (tokens, 3), generator=generator) for tokens in (1, 4, 1, 2, 4, 1)]  # repeats
    for ids in steps:
        ring.begin_step(*ids.shape)
        ring.record(3, ids)
        ring.record(7, ids % 2)
    expected = {3: sum(np.unique(ids.numpy()).size for ids in steps),
                7: sum(np.unique(ids.numpy() % 2).size for ids in steps)}
    drained, uses = ring.drain_uses(with_ids=False)
    assert drained == [] and uses == expected and ring.drain_uses(with_ids=True) == ([], {})
