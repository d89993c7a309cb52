"""Golden models, timed models and the simulator flow."""
