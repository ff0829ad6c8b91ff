"""One model source -> one plan -> one build: what a user named (ModelSource), what the engine would put on the
device for it (plan_for -> LoadPlan), used alike by the loader, the picker, `wisp configure` and the budget marks."""
