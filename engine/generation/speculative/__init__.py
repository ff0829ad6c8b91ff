"""Speculative decoding: drafts proposed cheaply (n-grams of the text so far) and verified by the model k+1
positions in one step, losslessly (engine.generation.speculative.verify)."""
