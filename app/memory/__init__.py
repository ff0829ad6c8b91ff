"""The live memory-split panel: budget slider, plan bar, live counters, MV-WSA curve, controller log."""
