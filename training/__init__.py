"""Training the demo model and the topology twins; runs on the H200, tested on CPU at toy size."""
