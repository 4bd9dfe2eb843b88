"""Hidden checks for decode_mask."""
