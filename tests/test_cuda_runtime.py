"""The CUDA runtime layer: caching allocator, emulator backend, lg.cuda, and (marked `cuda`,
skipped without a GPU) the same checks on the real driver backend."""
from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime.cuda import driver
from llgrad.runtime.cuda.allocator import CachingAllocator, OutOfMemory, round_size
from llgrad.runtime.cuda.cublas import CublasError

FILL_PTX = r"""
.version 7.8
.target sm_80
.address_size 64

.visible .entry fill(
    .param .u64 p,
    .param .u64 n
)
{
    .reg .pred  %pr<2>;
    .reg .b32   %r<5>;
    .reg .b64   %rd<7>;

    ld.param.u64        %rd1, [p];
    ld.param.u64        %rd2, [n];
    mov.u32             %r1, %ctaid.x;
    mov.u32             %r2, %ntid.x;
    mov.u32             %r3, %tid.x;
    mad.lo.u32          %r4, %r1, %r2, %r3;
    cvt.u64.u32         %rd3, %r4;
    setp.ge.u64         %pr1, %rd3, %rd2;
    @%pr1 bra           DONE;
    cvta.to.global.u64  %rd4, %rd1;
    shl.b64             %rd5, %rd3, 2;
    add.s64             %rd6, %rd4, %rd5;
    st.global.u32       [%rd6], %r4;
DONE:
    ret;
}
"""


# --------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------

@pytest.fixture
def emu(monkeypatch):
    """The emulator backend, made fresh for the test and forgotten afterwards."""
    monkeypatch.setenv(driver.EMULATE_ENV, "1")
    driver._reset_for_tests()
    try:
        yield driver.get()
    finally:
        driver._reset_for_tests()


@pytest.fixture
def nobackend(monkeypatch):
    """No backend at all: emulation off and the driver probe forced to fail."""
    monkeypatch.delenv(driver.EMULATE_ENV, raising=False)
    driver._reset_for_tests()
    monkeypatch.setattr(driver, "_real_probe", (False, "forced off by the test"))
    try:
        yield
    finally:
        driver._reset_for_tests()


def _real_gpu() -> bool:
    saved = os.environ.pop(driver.EMULATE_ENV, None)
    try:
        driver._reset_for_tests()
        return driver.available() and not driver.emulating()
    finally:
        if saved is not None:
            os.environ[driver.EMULATE_ENV] = saved
        driver._reset_for_tests()


@pytest.fixture
def gpu(monkeypatch):
    """The real driver backend (the test is skipped without a GPU)."""
    monkeypatch.delenv(driver.EMULATE_ENV, raising=False)
    driver._reset_for_tests()
    if not (driver.available() and not driver.emulating()):
        driver._reset_for_tests()
        pytest.skip("needs an NVIDIA GPU with its driver and cuda-bindings")
    yield driver.get()
    driver._reset_for_tests()


@pytest.fixture(params=["emulator", pytest.param("gpu", marks=pytest.mark.cuda)])
def backend(request):
    """Each shared check runs on the emulator and (marked `cuda`) on the real GPU."""
    return request.getfixturevalue("emu" if request.param == "emulator" else "gpu")


def _to_device(b, arr: np.ndarray):
    blk = b.alloc(arr.nbytes)
    b.copy_htod(blk.ptr, arr.ctypes.data, arr.nbytes)
    return blk


def _from_device(b, blk, dtype, count: int) -> np.ndarray:
    out = np.empty(count, dtype)
    b.copy_dtoh(out.ctypes.data, blk.ptr, out.nbytes)
    return out


# --------------------------------------------------------------------------------------
# the allocator on its own (a fake driver with a memory limit)
# --------------------------------------------------------------------------------------

class FakeDriver:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.live: dict[int, int] = {}
        self.next = 1 << 20
        self.allocs = 0
        self.frees = 0

    def alloc(self, n: int) -> int:
        if sum(self.live.values()) + n > self.limit:
            raise OutOfMemory(n)
        ptr = self.next
        self.next += n
        self.live[ptr] = n
        self.allocs += 1
        return ptr

    def free(self, ptr: int) -> None:
        del self.live[ptr]
        self.frees += 1


def test_round_size():
    assert round_size(0) == 0
    assert round_size(1) == 512 and round_size(512) == 512 and round_size(513) == 1024
    assert round_size((1 << 20) - 1) == 1 << 20
    assert round_size(1 << 20) == 2 << 20
    assert round_size((2 << 20) + 1) == 4 << 20


def test_allocator_reuse_and_statistics():
    drv = FakeDriver(1 << 30)
    a = CachingAllocator(drv.alloc, drv.free)
    b1 = a.allocate(100)
    assert (b1.nbytes, b1.capacity) == (100, 512)
    assert a.memory_allocated() == 512 and a.memory_reserved() == 512
    ptr = b1.ptr
    b1.free()
    assert b1.freed and a.memory_allocated() == 0 and a.memory_reserved() == 512
    with pytest.raises(RuntimeError, match="already freed"):
        b1.free()
    b2 = a.allocate(300)                           # same size class: the cached block
    assert b2.ptr == ptr and drv.allocs == 1
    b3 = a.allocate(3 << 20)
    assert b3.capacity == 4 << 20 and drv.allocs == 2
    assert a.max_memory_allocated() == 512 + (4 << 20)
    del b3
    gc.collect()
    assert a.memory_allocated() == 512 and a.memory_reserved() == 512 + (4 << 20)
    assert a.max_memory_allocated() == 512 + (4 << 20)
    a.reset_peak_memory_stats()
    assert a.max_memory_allocated() == 512 and a.max_memory_reserved() == 512 + (4 << 20)
    a.empty_cache()
    assert a.memory_reserved() == 512 and drv.frees == 1 and list(drv.live) == [ptr]
    s = a.stats()
    assert s["allocated_bytes.all.current"] == 512 and s["reserved_bytes.all.current"] == 512
    assert s["allocation.all.current"] == 1 and s["segment.all.current"] == 1
    del b2
    a.empty_cache()
    assert not drv.live and a.memory_reserved() == 0


def test_allocator_zero_bytes():
    drv = FakeDriver(1 << 20)
    a = CachingAllocator(drv.alloc, drv.free)
    z = a.allocate(0)
    assert z.ptr == 0 and z.nbytes == 0 and drv.allocs == 0 and a.memory_allocated() == 0
    z.free()
    z.free()                                       # empty blocks have nothing to give back
    with pytest.raises(ValueError):
        a.allocate(-1)


def test_allocator_out_of_memory_empties_cache_then_raises():
    drv = FakeDriver(4 << 20)
    a = CachingAllocator(drv.alloc, drv.free, device_name="GPU 0 (fake)")
    x = a.allocate(2 << 20)
    x.free()                                       # cached: 2 MiB still held from the "driver"
    y = a.allocate(3 << 20)                        # needs 4 MiB: fails, empties cache, retries
    assert y.capacity == 4 << 20 and drv.frees == 1
    assert a.stats()["num_alloc_retries"] == 1
    with pytest.raises(RuntimeError, match=r"CUDA out of memory: tried to allocate 1 bytes"):
        a.allocate(1)
    assert a.stats()["num_ooms"] == 1
    del y
    assert a.allocate(1).capacity == 512           # freed block cached, but new class fits after empty


def test_allocator_threads():
    drv = FakeDriver(1 << 30)
    a = CachingAllocator(drv.alloc, drv.free)

    def work():
        for i in range(300):
            blk = a.allocate(512 * (1 + i % 4))
            blk.free()

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert a.memory_allocated() == 0 and drv.allocs <= 16
    a.empty_cache()
    assert not drv.live


# --------------------------------------------------------------------------------------
# backend selection
# --------------------------------------------------------------------------------------

def test_selection_emulator(emu):
    assert driver.available() and driver.emulating() and driver.initialized()
    assert emu.emulated and driver.get() is emu
    assert emu.device_count() == 1 and emu.device_name() == "llgrad grid emulator (host)"
    assert emu.capability() == (9, 0) and emu.multiprocessors() == (os.cpu_count() or 1)
    assert emu.total_memory() > 0


def test_selection_without_backend(nobackend):
    assert not driver.available() and not driver.emulating()
    with pytest.raises(RuntimeError, match="CUDA is not available.*LLGRAD_CUDA_EMULATE=1"):
        driver.get()
    assert not driver.initialized()


def test_import_does_not_load_bindings():
    code = ("import sys, llgrad, llgrad.runtime.cuda, llgrad.runtime.cuda.driver, "
            "llgrad.runtime.cuda.allocator; assert 'cuda.bindings' not in sys.modules; "
            "assert 'llgrad.runtime.cuda.cublas' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --------------------------------------------------------------------------------------
# memory, copies, memset, gemm, events, streams: on the emulator and (marked) the GPU
# --------------------------------------------------------------------------------------

def test_alloc_reuse_and_stats(backend):
    b = backend
    b.empty_cache()
    base = b.memory_allocated()
    blk = b.alloc(1000)
    assert blk.nbytes == 1000 and blk.ptr != 0
    if b.emulated:
        assert blk.ptr % 64 == 0
    assert b.memory_allocated() == base + 1024
    b.reset_peak_memory_stats()
    ptr = blk.ptr
    del blk
    gc.collect()
    assert b.memory_allocated() == base and b.memory_reserved() >= base + 1024
    again = b.alloc(700)
    assert again.ptr == ptr
    assert b.max_memory_allocated() == base + 1024
    again.free()
    b.empty_cache()
    assert b.memory_reserved() == b.memory_allocated() == base
    z = b.alloc(0)
    assert z.ptr == 0 and z.nbytes == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_copy_round_trip(backend, dtype):
    b = backend
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4099) * 100).astype(dtype)
    blk = _to_device(b, x)
    np.testing.assert_array_equal(_from_device(b, blk, dtype, x.size), x)
    other = b.alloc(x.nbytes)
    b.copy_dtod(other.ptr, blk.ptr, x.nbytes)
    np.testing.assert_array_equal(_from_device(b, other, dtype, x.size), x)
    rev = x[::-1].copy()                           # must outlive the non-blocking copy
    b.copy_htod(blk.ptr, rev.ctypes.data, x.nbytes, non_blocking=True)
    b.synchronize()
    np.testing.assert_array_equal(_from_device(b, blk, dtype, x.size), rev)


def test_memset(backend):
    b = backend
    blk = b.alloc(1024)
    b.memset(blk.ptr, 0, 1024)
    b.memset(blk.ptr + 100, 0x1AB, 50)              # only the low byte counts, as cuMemsetD8
    out = _from_device(b, blk, np.uint8, 1024)
    expect = np.zeros(1024, np.uint8)
    expect[100:150] = 0xAB
    np.testing.assert_array_equal(out, expect)


def _gemm_case(b, dtype, transa, transb, m, n, k, batch, alpha, beta, sa=None, sb=None,
               pad=3, seed=0):
    """Run b.gemm on column-major data with padded leading dimensions; compare with numpy."""
    rng = np.random.default_rng(seed)
    np_dt = np.dtype(dtype)
    ar, ac = (k, m) if transa else (m, k)          # stored A is ar x ac column-major
    br, bc = (n, k) if transb else (k, n)
    lda, ldb, ldc = ar + pad, br + pad, m + pad
    sa = lda * ac if sa is None else sa
    sb = ldb * bc if sb is None else sb
    sc = ldc * n
    a_buf = rng.standard_normal(max(sa * (batch - 1), 0) + lda * ac).astype(np_dt)
    b_buf = rng.standard_normal(max(sb * (batch - 1), 0) + ldb * bc).astype(np_dt)
    c_buf = rng.standard_normal(sc * batch).astype(np_dt)
    if beta == 0:
        c_buf[::7] = np.nan                        # C is not read when beta == 0

    def mats(buf, rows, cols, ld, stride):
        return np.stack([buf[i * stride:i * stride + ld * cols].reshape(cols, ld).T[:rows]
                         for i in range(batch)]).astype(np.float64)

    A, B, C = mats(a_buf, ar, ac, lda, sa), mats(b_buf, br, bc, ldb, sb), mats(c_buf, m, n, ldc, sc)
    opA = A.transpose(0, 2, 1) if transa else A
    opB = B.transpose(0, 2, 1) if transb else B
    expect = alpha * opA @ opB + (beta * C if beta != 0 else 0)
    da, db, dc = _to_device(b, a_buf), _to_device(b, b_buf), _to_device(b, c_buf)
    b.gemm(np_dt.name, transa, transb, m, n, k, alpha, da.ptr, lda, sa, db.ptr, ldb, sb,
           beta, dc.ptr, ldc, sc, batch)
    out_buf = _from_device(b, dc, np_dt, c_buf.size)
    got = mats(out_buf, m, n, ldc, sc)
    rtol = 1e-5 if np_dt == np.float32 else 1e-12
    np.testing.assert_allclose(got, expect, rtol=rtol, atol=rtol * 10 * max(k, 1))
    pad_rows = out_buf.reshape(batch, n, ldc)[:, :, m:]   # padding rows of C are untouched
    np.testing.assert_array_equal(pad_rows, c_buf.reshape(batch, n, ldc)[:, :, m:])


@pytest.mark.parametrize("transa", [False, True])
@pytest.mark.parametrize("transb", [False, True])
def test_gemm_transposes(backend, transa, transb):
    _gemm_case(backend, np.float32, transa, transb, 13, 7, 9, 1, 1.0, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_batched_beta(backend, dtype):
    _gemm_case(backend, dtype, False, True, 5, 6, 4, 3, 0.5, 2.0)
    _gemm_case(backend, dtype, True, False, 8, 3, 11, 4, -1.5, 0.0, seed=1)


def test_gemm_batch_stride_zero(backend):
    # B shared by every batch element (stride 0), as a broadcast weight
    _gemm_case(backend, np.float32, False, False, 6, 5, 7, 4, 1.0, 0.0, sb=0)
    _gemm_case(backend, np.float64, True, True, 6, 5, 7, 3, 1.0, 1.0, sa=0, seed=2)


def test_gemm_edge_cases(backend):
    b = backend
    c = _to_device(b, np.arange(6, dtype=np.float64))
    # k == 0: C = beta * C
    b.gemm("float64", False, False, 2, 3, 0, 1.0, 0, 2, 0, 0, 1, 0, 2.0, c.ptr, 2, 6, 1)
    np.testing.assert_array_equal(_from_device(b, c, np.float64, 6), 2 * np.arange(6))
    b.gemm("float64", False, False, 0, 3, 4, 1.0, 0, 1, 0, 0, 4, 0, 0.0, c.ptr, 1, 0, 1)
    with pytest.raises(CublasError, match="CUBLAS_STATUS_INVALID_VALUE"):
        b.gemm("float32", False, False, 4, 4, 4, 1.0, c.ptr, 2, 0, c.ptr, 4, 0, 0.0, c.ptr, 4, 0, 1)
    with pytest.raises(ValueError, match="float16"):
        b.gemm("float16", False, False, 1, 1, 1, 1.0, c.ptr, 1, 0, c.ptr, 1, 0, 0.0, c.ptr, 1, 0, 1)


def test_events_time_a_copy(backend):
    b = backend
    x = np.ones(1 << 20, np.float32)
    blk = b.alloc(x.nbytes)
    start, end = b.new_event(enable_timing=True), b.new_event(enable_timing=True)
    start.record()
    b.copy_htod(blk.ptr, x.ctypes.data, x.nbytes)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 0
    plain = b.new_event()
    plain.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        plain.elapsed_time(end)


def test_two_streams(backend):
    b = backend
    s1, s2 = b.new_stream(), b.new_stream()
    assert s1 != s2 and s1 != b.default_stream() and b.current_stream() == b.default_stream()
    x = np.arange(1 << 16, dtype=np.float32)
    src = _to_device(b, x)
    mid, dst = b.alloc(x.nbytes), b.alloc(x.nbytes)
    b.copy_dtod(mid.ptr, src.ptr, x.nbytes, stream=s1)
    ev = s1.record_event()
    s2.wait_event(ev)
    b.copy_dtod(dst.ptr, mid.ptr, x.nbytes, stream=s2)
    s2.synchronize()
    assert s2.query() and s1.query()
    np.testing.assert_array_equal(_from_device(b, dst, np.float32, x.size), x)
    b.set_current_stream(s1)
    try:
        assert b.current_stream() == s1
        out = np.empty_like(x)
        b.copy_dtoh(out.ctypes.data, dst.ptr, x.nbytes)      # on the current stream, s1
        np.testing.assert_array_equal(out, x)
    finally:
        b.set_current_stream(b.default_stream())


# --------------------------------------------------------------------------------------
# kernels: host kernels on the emulator, PTX on the GPU
# --------------------------------------------------------------------------------------

from llgrad.codegen.gpu.kernel import EMULATED_DEVICE_OFFSET  # noqa: E402

_HOST_KERNEL = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64))


def test_emulator_host_kernel_launch(emu):
    seen = {}

    def fill(params, dims):                          # the host build loops over all threads
        p, n = params[0], params[1]
        d = [dims[i] for i in range(7)]
        seen["dims"] = d
        seen["extra"] = params[2]
        total = min(n, d[0] * d[3])
        # device addresses are host addresses + EMULATED_DEVICE_OFFSET (see emulator.py)
        arr = (ctypes.c_uint32 * total).from_address(p - EMULATED_DEVICE_OFFSET)
        for i in range(total):
            arr[i] = i

    cb = _HOST_KERNEL(fill)
    mod = emu.load_host({"fill": ctypes.cast(cb, ctypes.c_void_p).value})
    fn = mod.function("fill")
    assert fn.name == "fill" and set(fn.attributes) >= {"registers", "shared_bytes",
                                                        "local_bytes", "max_threads"}
    blk = emu.alloc(4 * 1000)
    emu.launch(fn, (4, 1, 1), (256, 1, 1), 128, [blk.ptr, 1000, -7])
    assert seen["dims"] == [4, 1, 1, 256, 1, 1, 128] and seen["extra"] == -7
    np.testing.assert_array_equal(_from_device(emu, blk, np.uint32, 1000), np.arange(1000))
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_INVALID_VALUE"):
        emu.launch(fn, (1, 1, 1), (1024, 2, 1), 0, [blk.ptr, 1])
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_INVALID_VALUE"):
        emu.launch(fn, (0, 1, 1), (32, 1, 1), 0, [blk.ptr, 1])
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_NOT_FOUND"):
        mod.function("missing")
    with pytest.raises(RuntimeError, match="PTX"):
        emu.load_ptx(FILL_PTX, "fill")


@pytest.mark.skipif(not shutil.which("ptxas") and not os.path.exists("/usr/local/bin/ptxas"),
                    reason="ptxas is not installed")
def test_fill_ptx_assembles(tmp_path):
    ptxas = shutil.which("ptxas") or "/usr/local/bin/ptxas"
    src = tmp_path / "fill.ptx"
    src.write_text(FILL_PTX)
    for arch in ("sm_80", "sm_90"):
        subprocess.run([ptxas, "--gpu-name", arch, str(src), "-o", os.devnull], check=True)


@pytest.mark.cuda
def test_gpu_ptx_launch(gpu):
    mod = gpu.load_ptx(FILL_PTX, "fill")
    fn = mod.function("fill")
    assert fn.attributes["registers"] > 0 and fn.attributes["max_threads"] >= 256
    n = 1000
    blk = gpu.alloc(4 * 1024)
    gpu.memset(blk.ptr, 0xFF, 4 * 1024)
    gpu.launch(fn, ((n + 255) // 256, 1, 1), (256, 1, 1), 0, [blk.ptr, n])
    gpu.launch(fn, ((n + 255) // 256, 1, 1), (256, 1, 1), 0, (blk.ptr, n))   # reused buffers
    out = _from_device(gpu, blk, np.uint32, 1024)
    np.testing.assert_array_equal(out[:n], np.arange(n))
    assert (out[n:] == 0xFFFFFFFF).all()
    s = gpu.new_stream()
    gpu.memset(blk.ptr, 0, 4 * 1024, stream=s)
    gpu.launch(fn, (1, 1, 1), (128, 1, 1), 0, [blk.ptr, 100], stream=s)
    s.synchronize()
    out = _from_device(gpu, blk, np.uint32, 1024)
    np.testing.assert_array_equal(out[:100], np.arange(100))
    assert not out[100:].any()
    with pytest.raises(driver.CudaError, match="cuModuleGetFunction"):
        mod.function("missing")
    with pytest.raises(driver.CudaError, match="cuModuleLoadData"):
        gpu.load_ptx("this is not ptx", "bad")


@pytest.mark.cuda
def test_gpu_properties_and_out_of_memory(gpu):
    assert gpu.device_count() >= 1 and not gpu.emulated
    assert gpu.capability() >= (7, 0) and gpu.multiprocessors() > 0
    assert gpu.total_memory() > (1 << 30) and gpu.device_name()
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        gpu.alloc(gpu.total_memory() * 2)
    with pytest.raises(RuntimeError, match="load_host"):
        gpu.load_host({})


# --------------------------------------------------------------------------------------
# lg.cuda
# --------------------------------------------------------------------------------------

def test_lg_cuda_without_backend(nobackend):
    c = lg.cuda
    assert not c.is_available() and c.device_count() == 0 and not c.is_initialized()
    assert driver.device_count() == 0
    assert not c.is_bf16_supported()
    assert c.memory_allocated() == c.max_memory_allocated() == c.memory_reserved() == 0
    assert c.max_memory_reserved() == 0 and c.memory_stats() == {}
    c.empty_cache()
    c.reset_peak_memory_stats()
    for call in (c.synchronize, c.init, c.current_device, c.get_device_name,
                 c.get_device_capability, c.get_device_properties, c.current_stream,
                 c.default_stream, c.Stream, c.Event, lambda: c.set_device(0)):
        with pytest.raises(RuntimeError, match="CUDA is not available.*LLGRAD_CUDA_EMULATE=1"):
            call()


def test_lg_cuda_seeds(nobackend):
    c = lg.cuda
    saved = c._generator_seed()
    try:
        c.manual_seed(123)
        assert c.initial_seed() == 123 and c._generator_seed() == (123, 0)
        assert c._advance_offset(8) == 0 and c._advance_offset(4) == 8
        assert c._generator_seed() == (123, 12)
        c.manual_seed_all(-1)
        assert c.initial_seed() == 2 ** 64 - 1 and c._generator_seed()[1] == 0
        c.seed()
        first = c.initial_seed()
        c.seed_all()
        assert 0 <= first < 2 ** 64 and c.initial_seed() != first
    finally:
        c.manual_seed(saved[0])
        c._advance_offset(saved[1])


def test_lg_cuda_on_emulator(emu):
    c = lg.cuda
    assert driver.device_count() == 1
    assert c.is_available() and c.device_count() == 1 and c.is_initialized()
    c.init()
    assert c.current_device() == 0 and c.is_bf16_supported()
    assert c.get_device_name() == c.get_device_name(0) == c.get_device_name("cuda:0") \
        == "llgrad grid emulator (host)"
    assert c.get_device_capability(lg.device("cuda")) == (9, 0)
    props = c.get_device_properties(0)
    assert (props.name, props.major, props.minor) == ("llgrad grid emulator (host)", 9, 0)
    assert props.total_memory > 0 and props.multi_processor_count == (os.cpu_count() or 1)
    assert "grid emulator" in repr(props)
    c.set_device(0)
    with c.device(0):
        assert c.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        c.set_device(1)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        c.get_device_name(3)
    with pytest.raises(ValueError, match="Expected a cuda device"):
        c.get_device_name("cpu")
    c.synchronize()

    c.empty_cache()
    c.reset_peak_memory_stats()
    base = c.memory_allocated()
    blk = emu.alloc(5000)
    assert c.memory_allocated() == base + 5120 and c.max_memory_allocated() >= base + 5120
    stats = c.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak", "num_alloc_retries",
                "num_ooms"):
        assert key in stats
    assert stats["allocated_bytes.all.current"] == c.memory_allocated()
    blk.free()
    assert c.memory_reserved() >= base + 5120
    c.empty_cache()
    assert c.memory_reserved() == c.memory_allocated() == base
    assert c.max_memory_reserved() >= base + 5120


def test_lg_cuda_streams_and_events_on_emulator(emu):
    c = lg.cuda
    default = c.default_stream()
    assert c.current_stream() == default and default.cuda_stream == 0
    s = c.Stream()
    assert s != default and s.device == lg.device("cuda", 0)
    with c.stream(s):
        assert c.current_stream() == s and emu.current_stream() is s._stream
        inner = c.Stream()
        with c.stream(inner):
            assert c.current_stream() == inner
        assert c.current_stream() == s
    assert c.current_stream() == default
    with c.stream(None):
        assert c.current_stream() == default
    with s:
        assert c.current_stream() == s
    assert c.current_stream() == default
    start, end = c.Event(enable_timing=True), c.Event(enable_timing=True)
    start.record()
    s.wait_event(start)
    s.wait_stream(default)
    ev = s.record_event()
    assert isinstance(ev, c.Event) and ev.query()
    end.record(s)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0
    ev.wait(default)
    s.synchronize()
    assert s.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        ev.elapsed_time(end)


def test_lg_cuda_docstrings():
    for name in lg.cuda.__all__:
        obj = getattr(lg.cuda, name)
        if name == "CudaError":
            continue
        assert obj.__doc__ and obj.__doc__.strip(), name
    for cls in (lg.cuda.Stream, lg.cuda.Event):
        for attr, val in vars(cls).items():
            if callable(val) and not attr.startswith("_"):
                assert val.__doc__, f"{cls.__name__}.{attr}"


# --------------------------------------------------------------------------------------
# CudaBackend's code paths on a host double of cuda-bindings (same calling conventions:
# tuples (CUresult, value...), the real enums and handle types), so argument order, tuple
# unpacking and kernel-parameter packing are checked without a GPU
# --------------------------------------------------------------------------------------

class FakeBindings:
    """Host double of `cuda.bindings.driver` for the calls CudaBackend makes."""

    def __init__(self):
        from cuda.bindings import driver as real  # type: ignore[import-untyped]
        self.real = real
        for name in ("CUresult", "CUfunction_attribute", "CUdevice_attribute", "CUevent_flags",
                     "CUstream_flags", "CUstream", "CUfunction", "CUmodule", "CUevent",
                     "CUcontext", "CUdevice"):
            setattr(self, name, getattr(real, name))
        self.ok = real.CUresult.CUDA_SUCCESS
        self.buffers = {}
        self.calls = []
        self.limit = 1 << 24
        self.launches = []
        self.events = {}

    def _r(self, *vals):
        return (self.ok, *vals)

    def cuGetErrorName(self, err):
        return (self.ok, self.real.CUresult(int(err)).name.encode())

    def cuInit(self, flags):
        return self._r()

    def cuDeviceGetCount(self):
        return self._r(1)

    def cuDeviceGet(self, i):
        return self._r(self.real.CUdevice(i))

    def cuDevicePrimaryCtxRetain(self, dev):
        return self._r(self.real.CUcontext(0x1234))

    def cuCtxSetCurrent(self, ctx):
        self.calls.append("cuCtxSetCurrent")
        return self._r()

    def cuDeviceGetAttribute(self, attr, dev):
        A = self.real.CUdevice_attribute
        vals = {A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
                A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
                A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 132}
        return self._r(vals[attr])

    def cuDeviceGetName(self, n, dev):
        return self._r(b"Fake H200" + b"\0" * (n - 9))

    def cuDeviceTotalMem(self, dev):
        return self._r(self.limit)

    def cuMemAlloc(self, n):
        if sum(b.nbytes for b in self.buffers.values()) + n > self.limit:
            return (self.real.CUresult.CUDA_ERROR_OUT_OF_MEMORY, self.real.CUdeviceptr(0))
        buf = np.empty(n, np.uint8)
        self.buffers[buf.ctypes.data] = buf
        return self._r(self.real.CUdeviceptr(buf.ctypes.data))

    def cuMemFree(self, ptr):
        del self.buffers[int(ptr)]
        return self._r()

    def _copy(self, dst, src, n, stream):
        assert isinstance(stream, self.real.CUstream)
        ctypes.memmove(int(dst), int(src), n)
        return self._r()

    cuMemcpyHtoDAsync = cuMemcpyDtoHAsync = cuMemcpyDtoDAsync = _copy

    def cuMemsetD8Async(self, ptr, value, n, stream):
        ctypes.memset(int(ptr), value, n)
        return self._r()

    def cuStreamSynchronize(self, stream):
        return self._r()

    def cuCtxSynchronize(self):
        return self._r()

    def cuModuleLoadData(self, image):
        assert image.endswith(b"\0")
        if b".entry" not in image:
            return (self.real.CUresult.CUDA_ERROR_INVALID_PTX, None)
        return self._r(self.real.CUmodule(0x10))

    def cuModuleUnload(self, mod):
        return self._r()

    def cuModuleGetFunction(self, mod, name):
        if name != b"fill":
            return (self.real.CUresult.CUDA_ERROR_NOT_FOUND, None)
        return self._r(self.real.CUfunction(0x20))

    def cuFuncGetAttribute(self, attr, fn):
        return self._r(8 if attr == self.real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS else 1024)

    def cuFuncSetAttribute(self, fn, attr, value):
        self.calls.append(("cuFuncSetAttribute", int(value)))
        return self._r()

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert isinstance(params, int) and extra == 0
        slots = (ctypes.c_void_p * 2).from_address(params)
        p, n = (ctypes.c_int64.from_address(s).value for s in slots)
        self.launches.append(((gx, gy, gz), (bx, by, bz), shared, int(stream)))
        total = min(n, gx * bx)
        arr = (ctypes.c_uint32 * total).from_address(p)
        for i in range(total):
            arr[i] = i
        return self._r()

    def cuStreamCreate(self, flags):
        return self._r(self.real.CUstream(0x40 + len(self.calls)))

    def cuStreamDestroy(self, s):
        return self._r()

    def cuStreamQuery(self, s):
        return (self.real.CUresult.CUDA_ERROR_NOT_READY,)

    def cuStreamWaitEvent(self, s, e, flags):
        return self._r()

    def cuEventCreate(self, flags):
        ev = self.real.CUevent(0x80 + len(self.events))
        self.events[int(ev)] = None
        return self._r(ev)

    def cuEventRecord(self, ev, stream):
        self.events[int(ev)] = len(self.calls)
        return self._r()

    def cuEventSynchronize(self, ev):
        return self._r()

    def cuEventQuery(self, ev):
        return self._r()

    def cuEventElapsedTime(self, a, b):
        return self._r(0.25)

    def cuEventDestroy(self, ev):
        return self._r()


def test_driver_backend_on_a_bindings_double(monkeypatch):
    pytest.importorskip("cuda.bindings")
    fake = FakeBindings()
    monkeypatch.setattr(driver, "_bindings", lambda: fake)
    b = driver.CudaBackend()
    assert not b.emulated and b.device_count() == 1 and b.device_name() == "Fake H200"
    assert b.capability() == (9, 0) and b.multiprocessors() == 132 and b.total_memory() == 1 << 24
    x = np.arange(1000, dtype=np.float64)
    blk = _to_device(b, x)
    np.testing.assert_array_equal(_from_device(b, blk, np.float64, 1000), x)
    b.memset(blk.ptr, 0, 8)
    assert _from_device(b, blk, np.float64, 1)[0] == 0
    mod = b.load_ptx(FILL_PTX, "fill")
    fn = mod.function("fill")
    assert mod.function("fill") is fn and fn.attributes["registers"] == 8
    out = b.alloc(4 * 300)
    s = b.new_stream()
    b.launch(fn, (2, 1, 1), (256, 1, 1), 0, [out.ptr, 300], stream=s)
    b.launch(fn, (2, 1, 1), (256, 1, 1), 64 * 1024, (out.ptr, np.int64(300)))
    np.testing.assert_array_equal(_from_device(b, out, np.uint32, 300), np.arange(300))
    assert fake.launches[0][3] == int(s.handle) and fake.launches[1][3] == 0
    assert ("cuFuncSetAttribute", 64 * 1024) in fake.calls
    with pytest.raises(driver.CudaError, match="cuModuleGetFunction.*CUDA_ERROR_NOT_FOUND"):
        mod.function("nope")
    with pytest.raises(driver.CudaError, match="cuModuleLoadData.*CUDA_ERROR_INVALID_PTX"):
        b.load_ptx("junk", "bad")
    assert not s.query()
    e1, e2 = b.new_event(enable_timing=True), s.record_event(b.new_event(enable_timing=True))
    e1.record()
    s.wait_event(e1)
    assert e1.query() and e1.elapsed_time(e2) == 0.25
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        b.alloc(1 << 25)
    del blk
    b.empty_cache()
    assert len(fake.buffers) == 1                  # only `out` is still live
    b.synchronize()
    t = threading.Thread(target=lambda: b.memset(out.ptr, 0, 4))
    n_binds = fake.calls.count("cuCtxSetCurrent")
    t.start()
    t.join()
    assert fake.calls.count("cuCtxSetCurrent") == n_binds + 1   # bound once on the new thread
