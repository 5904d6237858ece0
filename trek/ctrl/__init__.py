"""TrekBench-Ctrl: pools, republication, fabrication, conditions and rendering (paper section 4, appendix D)."""
