"""The end-to-end CUDA tests of test_cuda_emulated.py, on a real GPU (`pytest -m cuda`):
device tensors, eager ops and autograd against torch, a Module.cuda() training loop,
compiled B1/B6/B8 steps and a compiled training step against the CPU path."""
from __future__ import annotations

import pytest

from llgrad.runtime.cuda import driver

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not driver.available() or driver.emulating(),
                                 reason="needs an NVIDIA GPU (not the emulator)")]

from tests.test_cuda_emulated import (  # noqa: E402,F401  (collected here, on the device)
    test_autograd_through_cuda_ops_matches_torch, test_compiled_training_step_with_cuda_module_matches_cpu,
    test_compiled_value_and_grad_matches_cpu, test_device_tensor_basics, test_eager_ops_match_cpu,
    test_gradient_flows_through_device_copies, test_in_place_ops_on_cuda_tensors,
    test_inspect_target_cuda_gives_ptx_without_a_gpu, test_mixing_devices_raises_torchs_error,
    test_module_cuda_training_matches_cpu)
