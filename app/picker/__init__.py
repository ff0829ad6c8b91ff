"""The model picker: models found on this machine, their shape and how they fit the budget."""
