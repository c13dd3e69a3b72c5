"""taco.codec with the 3- and 2-bit integer codecs (int3, int2): the CPU path takes every form (the
bytes against the CLI are in test_codec.py's every-preset test), error feedback over a Hadamard
codec is e' = v - D(C(v)) bit for bit, and the GPU side runs the symmetric g<G> forms (every preset:
test_codec.py's CUDA tests compare them with the CPU) and refuses the others with the reason its one
dispatch point gives (GpuQuant::unsupported_reason), on CUDA tensors as in the variant list."""
import pytest
import torch

import taco.codec as tc
from conftest import needs_cuda

LOWBIT = ["int3-g32", "int3-g32-had", "int3-g128-had", "int2-g32", "int2-g64-had", "int2-g128-had",
          "int3:asym:g32", "int2:g64:rht:seed=3", "int3:row", "int2:tile32"]


def rand(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g))


@pytest.mark.parametrize("variant", LOWBIT)
def test_cpu_encodes_and_decodes_every_form(variant):
    x = torch.randn((64, 256), generator=torch.Generator().manual_seed(1))
    w = tc.encode(x, variant)
    assert w.nbytes == tc.wire_bytes(variant, x.shape)
    bits = 3 if variant.startswith("int3") else 2
    assert w.layout["codes"]["bytes"] == (x.numel() * bits + 7) // 8  # whole groups: no padded tail
    y = tc.decode(w)
    err = float((y - x).norm() / x.norm())
    assert 0 < err < (0.4 if bits == 3 else 0.9)  # Gaussian: a step of about sigma (int3), 2 sigma


@pytest.mark.parametrize("variant", ["int3-g32-had", "int2-g64-had", "int4-g32-had"])
def test_error_feedback_over_a_hadamard_codec_is_v_minus_its_decode(variant):
    e = torch.zeros(32, 192)
    ref = torch.zeros(32, 192)
    for step in range(4):
        x = rand((32, 192), 10 + step)
        w = tc.encode(x, variant, residual=e)
        v = x + ref
        assert torch.equal(w.data, tc.encode(v, variant).data), step
        ref = v - tc.decode(tc.encode(v, variant))
        assert torch.equal(e.view(torch.int32), ref.view(torch.int32)), step
    assert tc.get_codec("ef:" + variant).feedback


# The forms without a GPU kernel and the reason the dispatch point gives for each.
GPU_REFUSED = {"int3:asym:g32": "asymmetric integer codes",
               "int3:row": "row blocks of int3 elements (GPU: e4m3, e5m2, int8; elements below 8 bits take g<G>)",
               "int2:tile32": "tile blocks (GPU: g<G>, row, col, tensor)",
               "int2:g32:sue4m3": "ue4m3 scales with int2 elements (GPU: with e2m1 or int4)"}


def test_the_gpu_side_runs_the_group_forms_and_names_what_it_refuses():
    gpu = {v["name"]: v["gpu"] for v in tc.variants()}
    presets = {n for n in gpu if n.startswith(("int3", "int2"))}
    assert presets == {"int3-g32", "int3-g32-had", "int3-g64-had", "int3-g128-had",
                       "int2-g32", "int2-g32-had", "int2-g64-had", "int2-g128-had"}
    for variant in LOWBIT + list(GPU_REFUSED):
        reason = tc.get_codec(variant).gpu_unsupported_reason
        if "without nvcc" in reason:
            pytest.skip("this build has no GPU backend")
        assert reason == GPU_REFUSED.get(variant, ""), variant
    assert all(gpu[n] for n in presets)


@needs_cuda
@pytest.mark.parametrize("variant", ["int3:g16:had", "int2:g256:rht:seed=3", "int3:g1024", "int2:g32:sbf16",
                                     "int3:g128:had:sbf16", "int2:g128:had:sbf16"])
def test_cuda_wires_and_error_feedback_of_other_group_forms_equal_the_cpu(variant):
    # the presets run in test_codec.py's CUDA tests; these are grammar forms beside them (a tail too)
    for shape in [(64, 256), (7, 999)]:
        x = rand(shape, 3)
        cpu = tc.encode(x, variant)
        gpu = tc.encode(x.cuda(), variant)
        assert torch.equal(gpu.data.cpu(), cpu.data), (variant, shape)
        assert torch.equal(tc.decode(gpu, dtype=torch.float32).cpu().view(torch.int32),
                           tc.decode(cpu, dtype=torch.float32).view(torch.int32)), (variant, shape)
        e_cpu = rand(shape, 4) * 0.01
        e_gpu = e_cpu.cuda()
        for step in range(2):
            xs = rand(shape, 5 + step)
            wc = tc.encode(xs, variant, residual=e_cpu)
            wg = tc.encode(xs.cuda(), variant, residual=e_gpu)
            assert torch.equal(wg.data.cpu(), wc.data), (variant, shape, step)
            assert torch.equal(e_gpu.cpu().view(torch.int32), e_cpu.view(torch.int32)), (variant, step)


@needs_cuda
@pytest.mark.parametrize("variant", ["int3:asym:g32", "int2:row"])
def test_cuda_tensors_are_refused_naming_the_reason(variant):
    with pytest.raises(ValueError) as ei:
        tc.encode(torch.ones(64, 64, device="cuda"), variant)
    assert tc.get_codec(variant).gpu_unsupported_reason in str(ei.value)
