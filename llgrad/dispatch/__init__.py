"""The dispatch layer: what every op consults before it runs.

- `grad_mode`: the grad modes, below `tensor` (which imports it; it imports nothing of
  llgrad); `lg.autograd.grad_mode` is the same module's public name.
- `apply`: the interpreter stack (eager, recording, tracing, batching, forward-mode) and the
  single entry every op goes through, above `tensor` and the tape, below `functions`.
"""
