"""Hidden checks for varlen_attention: packed sequences (cu_seqlens) and left-padded batches."""
