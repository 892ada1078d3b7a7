"""Convert traces into Chakra rank sets: PyTorch host/linked traces (``pytorch``) and ASTRA-sim text (``text``)."""
