"""Capture PyTorch training runs: host execution trace + Kineto trace per rank (torch optional)."""
