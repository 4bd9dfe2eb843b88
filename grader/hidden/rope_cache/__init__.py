"""Hidden checks for rope_cache: rotary embeddings during decode, streams of steps, trees of drafts."""
