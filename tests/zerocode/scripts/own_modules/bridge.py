"""A training script's own module that happens to be called `bridge`."""

NAME = "user bridge"
