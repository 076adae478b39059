"""Providers, the media store, and sources and sinks."""
