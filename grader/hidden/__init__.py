"""Hidden checks, one package per exercise: ``<id>/checks.py`` and the oracles it uses."""
