"""Hidden checks for split_kv_decode: flash-decoding's split-KV merge and cascade attention."""
