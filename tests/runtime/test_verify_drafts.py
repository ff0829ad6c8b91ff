"""Verification of drafts: greedy takes the argmax run; sampling keeps the model's distribution (rejection
sampling with a deterministic draft), checked statistically."""

import torch

from engine.generation.speculative.verify import probabilities, verify_drafts
from engine.sampling import SamplingParams


def test_greedy_accepts_up_to_the_first_disagreement_and_adds_the_models_token():
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 9.0]])  # argmax 1, 0, 2
    greedy = SamplingParams()
    assert verify_drafts(logits, [1, 0], greedy, None)[0] == [1, 0, 2]
    assert verify_drafts(logits, [1, 2], greedy, None)[0] == [1, 0]
    assert verify_drafts(logits, [2, 0], greedy, None)[0] == [1]
    tokens, logprobs = verify_drafts(logits, [1, 0], greedy, None)
    expected = torch.log_softmax(logits, -1)[[0, 1, 2], [1, 0, 2]]
    assert logprobs == expected.tolist()


def test_sampling_keeps_the_distribution():
    """First token ~ p0 whatever the draft; after an accepted draft d, the second ~ p1 (the model's distribution
    given d). 40000 draws: each frequency within 4.5 standard deviations."""
    torch.manual_seed(0)
    logits = torch.randn(2, 6) * 1.5
    params = SamplingParams(temperature=0.8, top_k=5)
    generator = torch.Generator().manual_seed(7)
    draft = int(torch.argsort(logits[0])[2])  # a middling draft: both accepted and rejected often
    num_draws = 40000
    first, second = torch.zeros(6), torch.zeros(6)
    for _ in range(num_draws):
        tokens, _ = verify_drafts(logits, [draft], params, generator)
        first[tokens[0]] += 1
        if tokens[0] == draft:
            second[tokens[1]] += 1
    for counts, probs in ((first, probabilities(logits[0], params)), (second, probabilities(logits[1], params))):
        total = counts.sum()
        sigma = (probs * (1 - probs) / total).sqrt()
        assert ((counts / total - probs).abs() <= 4.5 * sigma + 1e-6).all(), (counts / total, probs)
    assert probabilities(logits[0], params)[int(torch.argsort(logits[0])[0])] == 0  # top-k dropped a token
