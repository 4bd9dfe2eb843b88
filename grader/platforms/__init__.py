"""Glue for the platforms courses grade on: a Gradescope autograder, a GitHub Classroom workflow."""
