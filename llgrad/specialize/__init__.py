"""The templates of the generated fast paths: Python source written from plan objects.

Each fast path that llgrad writes as Python text (run by `llgrad._source.define`) is built
here from the same plan object its general path follows, one module per family:

- `record`: a direct call's recorder (`dispatch.apply.direct_recorder`) from the op's save
  plan, the node `dispatch.apply.record` makes written out;
- `output`: new tensors' fields and allocation written out (`Tensor._empty_maker`, eager
  launches, compiled runners, LAPACK output makers) from a layout;
- `elementwise`, `reduce`, `selection`: the eager launches from their kernel plans;
- `compiled`: a compiled graph's runner (`CompiledGraph.runner`) and a differentiable
  compiled call's node construction (`compiler.function.DiffCall.fast`).

The modules import nothing from llgrad: callers pass the plan (or its fields) in and bind
the constants the text names. tests/test_specializations.py runs every generated path
against its general path on random inputs.
"""
