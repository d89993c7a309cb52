"""Golden models, cycle models and the simulator flow."""
