"""The autograd tape: graph nodes, the backward engine, forward-mode tangents, custom
`Function`s and anomaly mode.

These sit below `llgrad.functions` (which record nodes and propagate tangents through them)
and below the public `llgrad.autograd` namespace, which re-exports what PyTorch users name
(`autograd.Function`, `autograd.forward_ad`, `autograd.graph.Node`...). Importing one of
these modules runs nothing above the tape.
"""
