"""Thin DVC stage entry points: read params.yaml, call xtrain, write artifacts. No logic lives here."""
