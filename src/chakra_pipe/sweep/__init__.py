"""Hardware sweeps: campaign configs expanded into grid points, simulated in shards of points."""
