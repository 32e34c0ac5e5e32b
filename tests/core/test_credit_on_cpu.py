import math

import pytest
import torch

from prover_verl.core import ForkOutcome, SegmentCredit, credit_tensor, merge_credit, segment_token_span

# row 0: policy, policy, env, env, policy, policy ; row 1: policy x3, env, policy, pad
MASK = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 1, 0]])


def seg(row, start, end, before, after, k=4):
    return SegmentCredit(row, start, end, ForkOutcome(before, k), ForkOutcome(after, k))


def test_fork_outcome_rate_and_errors():
    out = ForkOutcome(3, 4)
    assert out.rate == 0.75
    assert out.variance == pytest.approx(0.75 * 0.25 / 4)
    with pytest.raises(ValueError):
        ForkOutcome(0, 0)
    with pytest.raises(ValueError):
        ForkOutcome(5, 4)


def test_estimate_and_stderr():
    s = seg(0, 0, 2, before=1, after=3)
    assert s.estimate == 0.5
    assert s.stderr == pytest.approx(math.sqrt(2 * 0.25 * 0.75 / 4))
    with pytest.raises(ValueError):
        seg(0, 3, 3, 0, 1)


def test_credit_only_on_policy_tokens_inside_the_span():
    credit = credit_tensor([seg(0, 1, 5, before=1, after=3)], MASK)
    expected = torch.zeros(2, 6)
    expected[0, 1] = expected[0, 4] = 0.5  # tokens 2, 3 are environment tokens
    torch.testing.assert_close(credit, expected)


def test_multiple_segments_negative_zero_and_overlap():
    segments = [
        seg(0, 0, 2, before=0, after=2),  # +0.5
        seg(0, 0, 6, before=1, after=2),  # +0.25, overlaps: tokens 0, 1 keep the larger 0.5
        seg(1, 0, 3, before=2, after=1),  # negative: nothing
        seg(1, 4, 6, before=2, after=2),  # zero: nothing
    ]
    expected = torch.tensor([[0.5, 0.5, 0, 0, 0.25, 0.25], [0, 0, 0, 0, 0, 0]])
    torch.testing.assert_close(credit_tensor(segments, MASK), expected)


def test_min_estimate_threshold():
    segments = [seg(0, 0, 2, 1, 2), seg(1, 0, 2, 0, 3)]  # +0.25, +0.75
    credit = credit_tensor(segments, MASK, min_estimate=0.25)
    assert credit[0].sum() == 0
    torch.testing.assert_close(credit[1], torch.tensor([0.75, 0.75, 0, 0, 0, 0]))


def test_segment_outside_batch_is_an_error():
    with pytest.raises(ValueError, match="outside a batch"):
        credit_tensor([seg(2, 0, 1, 0, 1)], MASK)
    with pytest.raises(ValueError, match="outside a batch"):
        credit_tensor([seg(0, 0, 7, 0, 1)], MASK)


def test_merge_scales_by_coef_and_row_scale_on_policy_tokens_only():
    adv = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0, 1.0], [-2.0, -2.0, -2.0, 0.0, -2.0, 0.0]])
    credit = torch.tensor([[0.5, 0.5, 0.5, 0.0, 0.0, 0.0], [0.25, 0.0, 0.0, 0.0, 0.0, 0.0]])
    merged = merge_credit(adv, credit, MASK, coef=2.0, scale=torch.tensor([3.0, 1.0]))
    expected = torch.tensor([[4.0, 4.0, 0.0, 0.0, 1.0, 1.0], [-1.5, -2.0, -2.0, 0.0, -2.0, 0.0]])
    torch.testing.assert_close(merged, expected)
    torch.testing.assert_close(merge_credit(adv, credit, MASK, coef=0.0), adv)
    with pytest.raises(ValueError, match=">= 0"):
        merge_credit(adv, credit, MASK, coef=-1.0)
    with pytest.raises(ValueError, match="shape mismatch"):
        merge_credit(adv, credit[:, :3], MASK, coef=1.0)


def test_segment_token_span():
    turns = [(0, 4), (9, 12), (20, 25)]
    assert segment_token_span(turns, 1, 1) == (9, 12)
    assert segment_token_span(turns, 0, 2) == (0, 25)
    for bad in [(2, 1), (0, 3), (-1, 0)]:
        with pytest.raises(ValueError, match="outside a trajectory"):
            segment_token_span(turns, *bad)
