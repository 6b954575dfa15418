"""Stand-in for pytorch_fid in the real-repositories trial."""
