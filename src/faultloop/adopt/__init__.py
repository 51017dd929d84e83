"""Adopting a session NVIDIA's bash loop (NVRx) ran, to re-judge it without running anything."""
