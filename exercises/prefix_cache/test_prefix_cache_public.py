"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from prefix_cache import PrefixCache


def test_a_new_cache_has_every_block_free():
    cache = PrefixCache(6, 4)
    assert cache.num_free_blocks() == 6
    assert cache.num_cached_blocks() == 0


def test_blocks_come_from_the_front_of_the_queue():
    cache = PrefixCache(6, 2)
    assert cache.add_request(1, [1, 2, 3, 4, 5]) == 0
    assert cache.block_table(1).tolist() == [0, 1, 2]
    assert cache.block_table(1).dtype == np.int64
    assert cache.num_tokens(1) == 5
    assert cache.num_free_blocks() == 3
    assert cache.num_cached_blocks() == 2  # the third block holds one token


def test_a_second_request_is_served_the_shared_blocks():
    cache = PrefixCache(6, 2)
    cache.add_request(1, [1, 2, 3, 4, 5])
    assert cache.add_request(2, [1, 2, 3, 4, 9, 9, 9]) == 4
    assert cache.block_table(2).tolist() == [0, 1, 3, 4]


def test_append_token_takes_a_block_when_the_last_one_is_full():
    cache = PrefixCache(3, 2)
    cache.add_request(7, [5, 6])
    cache.append_token(7, 8)
    assert cache.num_tokens(7) == 3
    assert cache.block_table(7).tolist() == [0, 1]


def test_running_out_of_blocks_raises_runtime_error():
    cache = PrefixCache(2, 2)
    with pytest.raises(RuntimeError):
        cache.add_request(1, [1, 2, 3, 4, 5])
    assert cache.num_free_blocks() == 2


def test_a_reused_id_is_rejected():
    cache = PrefixCache(4, 2)
    cache.add_request(1, [1, 2])
    with pytest.raises(ValueError):
        cache.add_request(1, [3, 4])


def test_the_readmes_worked_example():
    cache = PrefixCache(6, 2)
    assert cache.add_request(1, [1, 2, 3, 4, 5]) == 0
    assert cache.num_cached_blocks() == 2
    assert cache.add_request(2, [1, 2, 3, 4, 9, 9, 9]) == 4
    assert cache.block_table(2).tolist() == [0, 1, 3, 4]
    assert cache.num_free_blocks() == 1
    cache.append_token(1, 6)
    cache.free(1)
    assert cache.num_free_blocks() == 2
    assert cache.add_request(3, [1, 2, 3, 4, 5, 6, 7]) == 6
    assert cache.block_table(3).tolist() == [0, 1, 2, 5]
    assert cache.num_free_blocks() == 0
    cache.append_token(2, 9)
    with pytest.raises(RuntimeError):
        cache.append_token(2, 9)
