"""Renderers: each reads a ``Result`` and writes one format; none recomputes a verdict."""
