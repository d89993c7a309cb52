"""cocotb testbenches; each module is run by :func:`scoville.sim.flow.run`."""
