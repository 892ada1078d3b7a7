"""Link a PyTorch host execution trace with its Kineto device trace (no torch, no HTA needed)."""
