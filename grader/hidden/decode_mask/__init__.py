"""Hidden checks for decode_mask."""

# The candidate's own tests are run against these ("reference", or the diagnosis a known-wrong
# version draws); the engine starts the runs as grading begins, beside the other checks.
OWN_TESTS_AGAINST = ("reference", "top_left_alignment")
