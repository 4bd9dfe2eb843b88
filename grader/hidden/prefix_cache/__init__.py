"""Hidden checks for prefix_cache: the block allocator of automatic prefix caching (chained
block hashes, hits that never serve the last prompt token, an LRU free queue freed tail first)."""
