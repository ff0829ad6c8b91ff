"""How many drafts a verify step checks, by rule: the k in 1..max_tokens that maximises the expected tokens a step
emits per second of step time.

Acceptance: each draft is taken as accepted with the same probability a, given the ones before it were (a
geometric model), so a step that verifies k drafts emits E(k) = (1 - a^(k+1)) / (1 - a) tokens. a is estimated
from the steps so far as accepted / (accepted + rejections), with one of each as a prior, decayed so it follows
a change of text.
Cost: a step's time grows with the positions per sequence q = 1 + k it verifies; on a paged MoE mostly through the
expert misses of the union of their experts, which stall the step. Step times are fitted to t(q) = t1 + (q - 1) d
by decayed least squares over every decode step (verifying or not), so the misses the union costs are in d as
measured. Until two different q have been timed, k alternates between max_tokens and 1 (a drafter that always
fills k, as the MTP layer does, would otherwise time one q only). When no k beats one token per t(1), k is 0
(no drafts) except every PROBE_INTERVAL-th choice, which drafts one token so the acceptance stays current. Probes
of one length cannot correct the slope the fit holds, so after REMEASURE_AFTER declines in a row the step times are
forgotten and measured again as at the start (k alternating between max_tokens and 1): a slow step among the first
ones (a loaded machine, a cold cache) does not decide for good. Each re-measure that still declines doubles the wait
before the next, up to MAX_REMEASURE_AFTER, so where drafts do not pay the re-measures cost little. The misses of
each verify step are counted too (SpecCounters) so that the cost can be read beside the acceptance.
Drafting itself costs time where a model computes the drafts (the MTP layer, one position at a time, and its
catch-up over the accepted positions): the seconds per draft, decayed as the rest, add to each draft's cost beside
d (prompt lookup's drafts cost next to nothing).
What drafting must beat is a plain decode step as the engine runs it: on CUDA a step the rule declines is launched
ahead of the one before it (its host work overlaps the GPU's), so it is faster than t(1) of a verify step, which
waits for its tokens. Those steps' own times (observe_plain) are the bar where measured; t(1) otherwise."""

from __future__ import annotations

from dataclasses import dataclass

DECAY = 0.95  # weight of the past per step: the estimates follow about the last 20 steps
PROBE_INTERVAL = 16  # while drafting does not pay, one choice in this many still drafts (one token)
REMEASURE_AFTER = 4 * PROBE_INTERVAL  # declines in a row before the step times are measured again
MAX_REMEASURE_AFTER = 64 * PROBE_INTERVAL  # the longest wait between re-measures (it doubles while they decline)


@dataclass
class DecayedFit:
    """Least squares of y against x with exponentially decayed weights."""

    weight: float = 0.0
    sum_x: float = 0.0
    sum_y: float = 0.0
    sum_xx: float = 0.0
    sum_xy: float = 0.0

    def add(self, x: float, y: float) -> None:
        self.weight, self.sum_x, self.sum_y = DECAY * self.weight + 1, DECAY * self.sum_x + x, DECAY * self.sum_y + y
        self.sum_xx, self.sum_xy = DECAY * self.sum_xx + x * x, DECAY * self.sum_xy + x * y

    def line(self) -> tuple[float, float] | None:
        """(intercept, slope), or None while the x seen do not spread."""
        if self.weight == 0:
            return None
        mean_x, mean_y = self.sum_x / self.weight, self.sum_y / self.weight
        variance = self.sum_xx / self.weight - mean_x * mean_x
        if variance < 1e-6:
            return None
        slope = (self.sum_xy / self.weight - mean_x * mean_y) / variance
        return mean_y - slope * mean_x, slope


def expected_tokens(acceptance: float, num_drafts: int) -> float:
    if acceptance >= 1.0:
        return num_drafts + 1.0
    return (1.0 - acceptance ** (num_drafts + 1)) / (1.0 - acceptance)


class DraftLength:
    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.accepted, self.rejections = 1.0, 1.0  # the prior: a = 1/2
        self.step_times = DecayedFit()
        self.num_declined = 0  # choices of 0 (or of a probe) so far
        self.num_declined_in_row = 0  # since drafting last paid or the step times were last forgotten
        self.remeasure_after = REMEASURE_AFTER
        self.num_unmeasured = 0  # choices made before the step times spread
        self.drafting_seconds, self.num_drafted = 0.0, 0.0  # decayed: the time drafting took, the drafts it made
        self.plain_seconds, self.num_plain = 0.0, 0.0  # decayed: plain decode steps' time, their count

    @property
    def acceptance(self) -> float:
        return self.accepted / (self.accepted + self.rejections)

    def observe_drafts(self, num_proposed: int, num_accepted: int) -> None:
        """One sequence's verified drafts: the first num_accepted of num_proposed were taken."""
        self.accepted = DECAY * self.accepted + num_accepted
        self.rejections = DECAY * self.rejections + (num_accepted < num_proposed)

    def observe_step(self, positions_per_seq: float, seconds: float) -> None:
        self.step_times.add(positions_per_seq, seconds)

    def observe_drafting(self, num_drafts: int, seconds: float) -> None:
        """One sequence's drafts took seconds to make."""
        self.drafting_seconds = DECAY * self.drafting_seconds + seconds
        self.num_drafted = DECAY * self.num_drafted + num_drafts

    def observe_plain(self, seconds: float) -> None:
        """A decode step that verified no drafts took seconds (wall time, as the engine ran it)."""
        self.plain_seconds = DECAY * self.plain_seconds + seconds
        self.num_plain = DECAY * self.num_plain + 1

    @property
    def seconds_per_draft(self) -> float:
        return self.drafting_seconds / self.num_drafted if self.num_drafted > 0 else 0.0

    def choose(self) -> int:
        """The number of drafts the next verify step checks for a sequence (0: decode it one token)."""
        line = self.step_times.line()
        if line is None:
            self.num_unmeasured += 1
            return self.max_tokens if self.num_unmeasured % 2 else 1
        intercept, per_position = line
        per_position = max(per_position, 0.0)
        base = max(intercept + per_position, 1e-9)  # t(1): a step of one position per sequence
        per_draft = per_position + self.seconds_per_draft
        rates = {k: expected_tokens(self.acceptance, k) / (base + k * per_draft)
                 for k in range(1, self.max_tokens + 1)}
        best = max(rates, key=rates.get)
        plain = self.plain_seconds / self.num_plain if self.num_plain > 0 else base
        if rates[best] > 1.0 / plain:
            self.num_declined_in_row, self.remeasure_after = 0, REMEASURE_AFTER
            return best
        return self.decline()

    def decline(self) -> int:
        """0 drafts, or 1 as a probe; after remeasure_after declines in a row, forget the step times."""
        self.num_declined += 1
        self.num_declined_in_row += 1
        if self.num_declined_in_row >= self.remeasure_after:
            self.step_times, self.num_unmeasured, self.num_declined_in_row = DecayedFit(), 0, 0
            self.remeasure_after = min(2 * self.remeasure_after, MAX_REMEASURE_AFTER)
        return 1 if self.num_declined % PROBE_INTERVAL == 0 else 0
