"""taco.codec: bytes equal to the C++ CLI's (`taco codec encode/decode`, the CPU reference) for
every preset, on random tensors and the shipped real samples; the same bytes from every input dtype
and library; CUDA wires equal CPU wires; one clear error for each kind of bad input."""
import subprocess

import h5py
import numpy as np
import pytest
import torch

import taco.codec as tc
from taco.errors import TacoInputError
from conftest import SAMPLES, needs_cuda

# Every preset with a wire of fixed size: AQ-SGD keeps a cache per training sample (the tensor codec
# rejects it, test_bad_input_...) and TAH-Quant's wire size depends on the data (padded slots,
# test_data_dependent_wires_...).
PRESETS = [v["name"] for v in tc.variants() if not v["name"].startswith(("aqsgd", "tahquant"))]
GPU_PRESETS = [v["name"] for v in tc.variants() if v["gpu"]]


def sample_tensor(name="gpt6l512-tp2-step000571.h5", index=1):
    """A real bf16 tensor (backward QKV partial gradient) from the shipped samples, as torch bf16."""
    with h5py.File(SAMPLES / name, "r") as f:
        bits = f["tensors"][f"t{index:06d}"][...]
    return torch.from_numpy(bits.astype(np.int32)).to(torch.int16).view(torch.bfloat16)


def rand(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * 2)
    return x.to(dtype)


def cli_encode(taco_bin, tmp_path, x32, variant):
    src, wire = tmp_path / "x.npy", tmp_path / "x.bin"
    np.save(src, x32)
    subprocess.run([taco_bin, "codec", "encode", "--variant", variant, str(src), str(wire)], check=True,
                   capture_output=True)
    return wire.read_bytes()


def cli_decode(taco_bin, tmp_path, wire_bytes, variant, shape):
    wire, out = tmp_path / "w.bin", tmp_path / "w.npy"
    wire.write_bytes(wire_bytes)
    subprocess.run([taco_bin, "codec", "decode", "--variant", variant, "--shape", f"{shape[0]},{shape[1]}",
                    str(wire), str(out)], check=True, capture_output=True)
    return np.load(out)


def shape_for(variant):
    # tile codecs need multiples of their tile; everything else takes any shape
    return (128, 256) if "tile" in variant else (96, 256)


@pytest.mark.parametrize("variant", PRESETS)
def test_cpu_wire_and_decode_equal_the_cli_on_random_input(variant, taco_bin, tmp_path):
    x = rand(shape_for(variant), seed=sum(map(ord, variant)))
    w = tc.encode(x.numpy(), variant)
    ref = cli_encode(taco_bin, tmp_path, x.numpy(), variant)
    assert w.nbytes == len(ref) == tc.wire_bytes(variant, x.shape)
    assert w.data.tobytes() == ref
    got = tc.decode(w)
    want = cli_decode(taco_bin, tmp_path, ref, variant, x.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("variant", ["taco", "taco-noh", "fp8-g128", "mxfp8", "int8-g128-had", "nvfp4", "int4-g32",
                                     "fp8-row", "bf16"])
@pytest.mark.parametrize("index", [0, 1, 9])
def test_cpu_wire_equals_the_cli_on_real_samples(variant, index, taco_bin, tmp_path):
    x = sample_tensor(index=index)
    w = tc.encode(x, variant)  # a bf16 torch tensor
    assert w.data.numpy().tobytes() == cli_encode(taco_bin, tmp_path, x.float().numpy(), variant)


@pytest.mark.parametrize("variant", ["taco", "fp8-g128", "int4-g32", "nvfp4"])
def test_every_input_dtype_and_library_gives_the_same_bytes(variant):
    x = sample_tensor(index=5)                       # bf16 values: exact in float32 and (mostly) float16
    f32 = x.float()
    ref = tc.encode(f32.numpy(), variant).data.tobytes()
    assert tc.encode(f32, variant).data.numpy().tobytes() == ref
    assert tc.encode(x, variant).data.numpy().tobytes() == ref
    h = f32.half()                                   # float16 input: the codec sees its float32 value
    assert tc.encode(h, variant).data.numpy().tobytes() == tc.encode(h.float(), variant).data.numpy().tobytes()
    assert tc.encode(h.numpy(), variant).data.tobytes() == tc.encode(h.float().numpy(), variant).data.tobytes()


def test_decode_rounds_once_to_the_output_dtype():
    x = rand((64, 128), 3)
    w = tc.encode(x, "taco")
    f32 = tc.decode(w)
    assert f32.dtype == torch.float32
    torch.testing.assert_close(tc.decode(w, dtype=torch.bfloat16), f32.to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(tc.decode(w, dtype="float16"), f32.to(torch.float16), rtol=0, atol=0)
    out = torch.empty(64, 128, dtype=torch.bfloat16)
    assert tc.decode(w, out=out) is out
    wb = tc.encode(x.to(torch.bfloat16), "taco")
    assert tc.decode(wb).dtype == torch.bfloat16   # default: the encoded tensor's dtype


def test_decode_reduce_is_the_float32_sum_in_order_rounded_once():
    xs = [rand((32, 256), s) for s in range(4)]
    ws = [tc.encode(x, "fp8-g128") for x in xs]
    acc = tc.decode(ws[0]).numpy()
    for w in ws[1:]:
        acc = (acc + tc.decode(w).numpy()).astype(np.float32)
    got = tc.decode_reduce(ws, dtype=torch.bfloat16)
    assert torch.equal(got, torch.from_numpy(acc).to(torch.bfloat16))
    assert torch.equal(tc.decode_reduce(ws), torch.from_numpy(acc))


def test_chunks_are_independent_row_blocks():
    x = rand((64, 96), 7)
    w = tc.encode(x, "taco", chunks=4)
    parts = b"".join(tc.encode(x[16 * k:16 * (k + 1)], "taco").data.numpy().tobytes() for k in range(4))
    assert w.chunks == 4 and w.data.numpy().tobytes() == parts
    assert torch.equal(tc.decode(w), torch.cat([tc.qdq(x[16 * k:16 * (k + 1)], "taco") for k in range(4)]))


def test_encode_into_an_earlier_wire_reuses_its_buffer():
    a, b = rand((16, 256), 3), rand((16, 256), 4)
    w = tc.encode(a, "fp8-g128")
    buf = w.data
    w2 = tc.encode(b.float(), "fp8-g128", out=w)  # b's codes in a's buffer, from float32 input
    assert w2 is w and w.data is buf and w.dtype == "float32"
    assert w.data.numpy().tobytes() == tc.encode(b, "fp8-g128").data.numpy().tobytes()
    assert torch.equal(tc.decode(w), tc.qdq(b.float(), "fp8-g128"))
    spelled = tc.encode(b.to(torch.bfloat16), "e4m3:g128", out=w)  # another spelling: checked by name
    assert spelled is w and tc.decode(w).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="another encode"):
        tc.encode(b, "taco", out=w)  # another variant
    with pytest.raises(ValueError, match="another encode"):
        tc.encode(rand((8, 256), 5), "fp8-g128", out=w)  # another shape


def test_decode_follows_a_wire_buffer_whose_storage_moved():
    # the arguments a Wire keeps for its buffer are checked against the buffer's pointer
    x = rand((16, 256), 6)
    w = tc.encode(x, "fp8-g128")
    want = tc.decode(w)
    w.data.set_(w.data.clone())  # the same bytes at another address
    assert torch.equal(tc.decode(w), want)
    with pytest.raises(AttributeError):
        w.data = torch.zeros(1, dtype=torch.uint8)  # read-only: the buffer belongs to the wire


def test_qdq_wire_bytes_and_layout():
    x = rand((8, 512), 2)
    assert torch.equal(tc.qdq(x, "mxfp8"), tc.decode(tc.encode(x, "mxfp8")))
    assert tc.wire_bytes("taco", (8, 512)) == 8 * 512 + 8 * (8 * 512 // 128)
    lay = tc.encode(x, "taco").layout
    assert lay["codes"]["bytes"] == 4096 and lay["scales"]["offset"] == 4096 and lay["total"] == 4352
    names = {v["name"] for v in tc.variants()}
    assert {"taco", "fp8-g128", "nvfp4", "bf16"} <= names


def test_error_feedback_residual_is_v_minus_its_decode():
    x = rand((16, 256), 11)
    e = rand((16, 256), 12) * 0.01
    e0 = e.clone()
    w = tc.encode(x, "int4-g32", residual=e)
    v = x + e0
    assert w.data.numpy().tobytes() == tc.encode(v, "int4-g32").data.numpy().tobytes()
    assert torch.equal(e, v - tc.decode(tc.encode(v, "int4-g32")))
    # ef: variants name the same wire
    assert tc.get_codec("ef:int4-g32").feedback and tc.wire_bytes("ef:int4-g32", (16, 256)) == w.nbytes


@pytest.mark.parametrize("bad, exc, needle", [
    (lambda: tc.encode(torch.ones(4, 8, dtype=torch.int32), "taco"), TypeError, "float32, bfloat16 or float16"),
    (lambda: tc.encode(torch.ones(8, 16).t(), "taco"), ValueError, "not contiguous"),
    (lambda: tc.encode(torch.ones(4, 8), "nonsense-codec"), ValueError, "nonsense"),
    (lambda: tc.encode(torch.ones(4, 8), ""), ValueError, "non-empty"),
    (lambda: tc.encode(torch.ones(4, 8), 128), TypeError, "variant must be a string, got int"),
    (lambda: tc.encode(torch.ones(100, 100), "fp8-tile128"), ValueError, "tile"),
    (lambda: tc.encode(torch.ones(0, 8), "taco"), ValueError, "empty"),
    (lambda: tc.encode(torch.ones(6, 8), "taco", chunks=4), ValueError, "equal chunks"),
    (lambda: tc.encode([1.0, 2.0], "taco"), TypeError, "numpy array, a torch tensor"),
    (lambda: tc.decode_reduce([tc.encode(torch.ones(4, 8), "taco"), tc.encode(torch.ones(4, 8), "fp8-g128")]),
     ValueError, "wires differ"),
    (lambda: tc.get_codec("aqsgd:int4-g32"), ValueError, "AQ-SGD"),
    (lambda: tc.get_codec("taco").encode(np.ones((4, 8), np.float32), np.empty(3, np.uint8), 1, 4, 8, 0),
     ValueError, "bytes"),
])
def test_bad_input_raises_one_clear_error(bad, exc, needle):
    with pytest.raises(exc) as ei:
        bad()
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg, msg


@pytest.mark.parametrize("variant", ["tahquant", "tahquant:tile=32", "lowrank:energy=0.5", "tt:order=3"])
def test_data_dependent_wires_are_the_cli_bytes_padded_to_the_bound(variant, taco_bin, tmp_path):
    """TAH-Quant (flagged tiles), low rank by energy and tensor trains by tolerance write wires whose
    size depends on the data: taco.codec carries them in fixed slots of Codec::wire_size's bound,
    the CPU reference's bytes then zeros, and decodes what the CLI decodes."""
    rows, cols = 64, 256
    x = rand((2 * rows, cols), seed=7).numpy()
    x[3, 5] = 300.0  # TAH-Quant: a tile dominated by one value is flagged (pivot + Hadamard)
    slot = tc.wire_bytes(variant, (rows, cols))
    w = tc.encode(x, variant, chunks=2)
    assert w.nbytes == 2 * slot
    raw = w.data.tobytes()
    for k in range(2):
        ref = cli_encode(taco_bin, tmp_path, x[k * rows:(k + 1) * rows], variant)
        got = raw[k * slot:(k + 1) * slot]
        assert len(ref) < slot and got[:len(ref)] == ref and got[len(ref):] == bytes(slot - len(ref))
        want = cli_decode(taco_bin, tmp_path, ref, variant, (rows, cols))
        np.testing.assert_array_equal(tc.decode(w)[k * rows:(k + 1) * rows].view(np.uint32), want.view(np.uint32))
    w.data[slot - 1] = 1  # a host wire is a numpy array; padding must be zero
    with pytest.raises(ValueError, match="padding"):
        tc.decode(w)


def test_error_feedback_over_tahquant_uses_the_padded_slot():
    """ef:tahquant: the residual step over TAH-Quant's fixed slots: e' = (x + e) - decode(wire)."""
    x = rand((64, 128), seed=11).numpy()
    e = np.zeros_like(x)
    w = tc.encode(x, "ef:tahquant", residual=e)
    assert w.nbytes == tc.wire_bytes("tahquant", x.shape)
    np.testing.assert_array_equal(w.data, tc.encode(x, "tahquant").data)  # first step: e = 0
    np.testing.assert_array_equal(e, x - tc.decode(w))


def groups_at(magnitudes, group=128):
    """A [len, 1024] float32 tensor: row i holds random signs times magnitudes[i] (8 groups of 128)."""
    g = torch.Generator().manual_seed(3)
    signs = torch.randint(0, 2, (len(magnitudes), 1024), generator=g).float() * 2 - 1
    return signs * torch.tensor(magnitudes, dtype=torch.float64).unsqueeze(1).float()


def test_out_of_range_groups_are_counted_and_reported_on_request():
    # taco represents groups of absmax about 1.8e-16 to 4e10 (docs/variants.md): 1e15 clips and
    # 1e-18 flushes to zero, silently by default.
    lo, hi = tc.codec_range("taco")
    assert lo == pytest.approx(2 ** -6 * 1e-15 * 128 ** 0.5) and hi == pytest.approx(448e9 / 128 ** 0.5)
    assert tc.codec_range("lowrank:rank=4") is None
    x = groups_at([1.0, 1e15, 1e-18, 0.0])
    assert tc.out_of_range(x, "taco") == 16 and tc.out_of_range(x, "fp8-g128") == 0
    assert tc.out_of_range(x.numpy(), "taco", chunks=2) == 16
    assert tc.out_of_range(x.to(torch.bfloat16), "taco-noh") == 16
    y = tc.qdq(x, "taco")
    assert (y[1] - x[1]).norm() / x[1].norm() > 0.99 and (y[2] - x[2]).norm() / x[2].norm() > 0.5
    # Off by default; on request a warning or a ValueError naming the variant and the count.
    plain = tc.encode(x, "taco")
    with pytest.warns(RuntimeWarning, match="taco: 16 group"):
        warned = tc.encode(x, "taco", range_check="warn")
    assert torch.equal(warned.data, plain.data)  # the bytes do not change
    with pytest.raises(ValueError, match="taco: 16 group.*outside the range") as ei:
        tc.encode(x, "taco", range_check="raise")
    assert isinstance(ei.value, TacoInputError)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tc.encode(groups_at([1.0, 1e3]), "taco", range_check="raise")  # in range: silent
    with pytest.raises(ValueError, match="range_check must be None, 'warn' or 'raise'"):
        tc.encode(x, "taco", range_check=True)


# ---- CUDA (the GPU machine) ---------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("variant", GPU_PRESETS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_cuda_wires_and_decodes_equal_the_cpu(variant, dtype):
    # tile codecs need rows and cols in whole tiles, TAH-Quant cols in whole 64-wide tiles
    shapes = ([(128, 256)] if "tile" in variant else
              [(96, 192), (256, 1024)] if variant.startswith("tahquant") else [(96, 160), (256, 1024)])
    for i, shape in enumerate(shapes + ["sample"]):
        x = sample_tensor(index=i).to(dtype) if shape == "sample" else rand(shape, i, dtype)
        cpu = tc.encode(x, variant)
        gpu = tc.encode(x.cuda(), variant)
        assert gpu.data.is_cuda
        assert torch.equal(gpu.data.cpu(), cpu.data), (variant, dtype, shape)
        for out in (torch.float32, torch.bfloat16, torch.float16):
            a = tc.decode(cpu, dtype=out)
            b = tc.decode(gpu, dtype=out).cpu()
            assert torch.equal(a.view(torch.int16) if out != torch.float32 else a.view(torch.int32),
                               b.view(torch.int16) if out != torch.float32 else b.view(torch.int32)), (variant, out)
        ws = [tc.encode(x.cuda() * k, variant) for k in (1, -2, 3)]
        wc = [tc.encode(x * k, variant) for k in (1, -2, 3)]
        assert torch.equal(tc.decode_reduce(ws, dtype=torch.float32).cpu(), tc.decode_reduce(wc, dtype=torch.float32))


@needs_cuda
def test_cuda_runs_on_the_current_stream_without_host_sync():
    x = rand((4096, 1024), 5, torch.bfloat16).cuda()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        w = tc.encode(x, "taco")
        y = tc.decode(w)
    s.synchronize()
    assert torch.equal(y.cpu(), tc.qdq(x.cpu(), "taco"))


@needs_cuda
def test_cuda_rejects_a_variant_without_kernels_naming_it():
    with pytest.raises(ValueError) as ei:
        tc.encode(torch.ones(64, 64, device="cuda"), "lowrank:rank=8")
    assert "lowrank" in str(ei.value) and "CUDA" in str(ei.value)


def test_error_feedback_counts_non_finite_inputs_as_zero():
    x = rand((4, 64), 21)
    x[0, 3], x[1, 5], x[2, 7] = float("nan"), float("inf"), -float("inf")
    e = torch.full((4, 64), 0.25)
    w = tc.encode(x, "fp8-g128", residual=e)
    v = torch.where(torch.isfinite(x), x, torch.zeros_like(x)) + 0.25
    assert w.data.numpy().tobytes() == tc.encode(v, "fp8-g128").data.numpy().tobytes()
    assert torch.isfinite(e).all() and torch.equal(e, v - tc.decode(tc.encode(v, "fp8-g128")))


@needs_cuda
@pytest.mark.parametrize("variant", GPU_PRESETS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_cuda_error_feedback_equals_the_cpu(variant, dtype):
    # three steps of one stream: the wires and the fp32 residuals stay equal bit for bit
    shape = (64, 256) if "tile" not in variant else (128, 256)
    e_cpu = rand(shape, 40) * 0.01
    e_gpu = e_cpu.cuda()
    for step in range(3):
        x = rand(shape, 41 + step, dtype)
        x[0, 3], x[1, 5] = float("nan"), float("inf")
        wc = tc.encode(x, variant, residual=e_cpu)
        wg = tc.encode(x.cuda(), variant, residual=e_gpu)
        assert torch.equal(wg.data.cpu(), wc.data), (variant, dtype, step)
        assert torch.equal(e_gpu.cpu().view(torch.int32), e_cpu.view(torch.int32)), (variant, dtype, step)
