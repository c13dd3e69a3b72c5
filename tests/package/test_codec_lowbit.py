"""taco.codec with the 3- and 2-bit integer codecs (int3, int2): the CPU path takes every form (the
bytes against the CLI are in test_codec.py's every-preset test), error feedback over a Hadamard
codec is e' = v - D(C(v)) bit for bit, and the GPU side refuses them with the reason its one
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


def test_the_gpu_side_names_the_missing_kernel():
    gpu = {v["name"]: v["gpu"] for v in tc.variants()}
    assert {n for n in gpu if n.startswith(("int3", "int2"))} == {
        "int3-g32", "int3-g32-had", "int3-g64-had", "int3-g128-had",
        "int2-g32", "int2-g32-had", "int2-g64-had", "int2-g128-had"}
    assert not any(gpu[n] for n in gpu if n.startswith(("int3", "int2")))
    for variant in LOWBIT:
        reason = tc.get_codec(variant).gpu_unsupported_reason
        if "without nvcc" in reason:
            pytest.skip("this build has no GPU backend")
        assert reason == f"no GPU kernel for {variant[:4]} codes yet: CPU reference only", variant


@needs_cuda
@pytest.mark.parametrize("variant", ["int3-g32-had", "int2:g64"])
def test_cuda_tensors_are_refused_naming_the_reason(variant):
    with pytest.raises(ValueError) as ei:
        tc.encode(torch.ones(64, 64, device="cuda"), variant)
    assert f"no GPU kernel for {variant[:4]} codes yet" in str(ei.value)
