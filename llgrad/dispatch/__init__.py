"""The dispatch layer: state every op consults before it runs, below `tensor`, `autograd`
and `tracer` (which import it; it imports none of them). It holds the grad modes
(`grad_mode`); `lg.autograd.grad_mode` is the same module's public name."""
