"""Prompt-lookup drafting: the continuation of the latest earlier occurrence of the longest suffix."""

from engine.generation.speculative.ngram import NgramIndex


def test_continues_the_latest_earlier_occurrence_of_the_suffix():
    tokens = [1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert NgramIndex().propose(tokens, 3) == [7, 8, 5]


def test_prefers_the_longest_matching_suffix():
    tokens = [4, 3, 6, 6, 2, 3, 5, 5, 2, 3]  # "3" last follows as 5 (latest), "2 3" as 5, but "4 3" never
    assert NgramIndex().propose(tokens, 2) == [5, 5]
    tokens = [2, 3, 8, 1, 3, 9, 2, 3]  # the bigram "2 3" continues with 8; the unigram "3" alone with 9
    assert NgramIndex().propose(tokens, 1) == [8]


def test_no_earlier_occurrence_and_limits():
    index = NgramIndex()
    assert index.propose([1, 2, 3], 4) == []
    assert index.propose([1, 2, 3, 1], 0) == []
    assert index.propose([1, 2, 3, 1], 10) == [2, 3, 1]  # the continuation ends at the text's end


def test_the_index_follows_a_growing_sequence():
    index, tokens = NgramIndex(), [5, 6, 7]
    assert index.propose(tokens, 2) == []
    tokens += [8, 5, 6]
    assert index.propose(tokens, 2) == [7, 8]
    tokens += [9, 5, 6]
    assert index.propose(tokens, 2) == [9, 5]  # the latest occurrence wins
