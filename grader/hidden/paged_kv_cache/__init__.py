"""Hidden checks for paged_kv_cache: a block-table KV cache shared by many sequences (reference
counts, copy-on-write) and grouped-query attention read through the block table."""
