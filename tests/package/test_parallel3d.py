"""python -m taco.train with pipeline and data parallelism beside TP (taco.train.parallel): the
simulated 3D run equals the gloo processes bit for bit, PP alone and DP alone equal the unsplit
model to fp32 rounding, compression fires on every route as often as the schedule says, and a bad
route, codec or split ends with one line and exit code 2."""
import json
import subprocess
import sys

import pytest

from conftest import REPO

STEPS, LAYERS, BATCH = 3, 2, 8
TINY = ["--layers", str(LAYERS), "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--batch",
        str(BATCH), "--steps", str(STEPS), "--eval-every", "2", "--eval-batches", "2", "--log-every", "1", "--data",
        str(REPO / "python"), "--data-bytes", "200000", "--threads", "1", "--device", "cpu"]
BF16_EVERYWHERE = ["--dtype", "bfloat16", "--compress", "bf16", "--compress-pp", "bf16", "--compress-dp", "bf16",
                   "--compress-dp-weights", "bf16"]


def train(tmp_path, name, *args, check=True):
    out = tmp_path / name
    r = subprocess.run([sys.executable, "-m", "taco.train", *TINY, *args, "--out", str(out)], capture_output=True,
                       text=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r, out


def losses(out):
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [(r["type"], r["step"], r.get("loss", r.get("val_loss"))) for r in recs if r["type"] in ("step", "val")]


def log_of(out):
    return json.loads((out / "train_log.json").read_text())


def fired(log):
    return {(f["route"], f["site"], f["direction"], f["collective"]): f["calls"] for f in log["fired"]}


def test_3d_simulated_equals_eight_gloo_processes_and_every_route_fires(tmp_path):
    tp, pp, dp, m = 2, 2, 2, 2
    _, sim = train(tmp_path, "sim", "--tp-sim", "2", "--pp-sim", "2", "--dp-sim", "2", *BF16_EVERYWHERE)
    _, real = train(tmp_path, "real", "--tp", "2", "--pp", "2", "--dp", "2", *BF16_EVERYWHERE)
    assert losses(sim) == losses(real)
    s, r = log_of(sim), log_of(real)
    assert s["final_params_sha256"] == r["final_params_sha256"]
    assert (s["mode"], r["mode"]) == ("sim", "dist") and r["tp"] == tp and r["pp"] == pp and r["dp"] == dp
    assert fired(s) == fired(r)
    want = {}
    for site, direction in (("attn_qkv", "bwd"), ("mlp_fc1", "bwd"), ("attn_out", "fwd"), ("mlp_out", "fwd")):
        want[("tp", site, direction, "all_reduce")] = STEPS * LAYERS * m  # every layer once per micro-batch
    for b in range(pp - 1):  # one send per boundary, direction and micro-batch
        want[("pp", f"boundary{b}", "fwd", "send")] = want[("pp", f"boundary{b}", "bwd", "send")] = STEPS * m
    want[("dp", "grads", "-", "reduce_scatter")] = want[("dp", "weights", "-", "all_gather")] = STEPS * pp
    assert fired(s) == want  # one replica's count: each stage's TP rank 0 of DP replica 0
    assert set(s["routes"]) == {"tp", "pp", "dp"}
    for route in s["routes"].values():
        assert route["bytes_per_element"] == 2.0  # bf16 on every route
    tokens = BATCH // dp // m * 32  # a micro-batch's tokens
    assert s["routes"]["pp"]["elements"] == 2 * (pp - 1) * STEPS * m * tokens * 64


def test_3d_error_feedback_streams_match_between_simulation_and_processes(tmp_path):
    args = ["--compress", "ef:int4-g32", "--compress-pp", "ef:int4-g32", "--compress-dp", "ef:int4-g32-had",
            "--compress-dp-weights", "int8-g128"]
    _, sim = train(tmp_path, "sim", "--pp-sim", "2", "--dp-sim", "2", "--micro-batches", "4", *args)
    _, real = train(tmp_path, "real", "--pp", "2", "--dp", "2", "--micro-batches", "4", *args)
    assert losses(sim) == losses(real)
    assert log_of(sim)["final_params_sha256"] == log_of(real)["final_params_sha256"]
    _, plain = train(tmp_path, "plain", "--pp-sim", "2", "--dp-sim", "2", "--micro-batches", "4")
    assert losses(plain) != losses(sim)  # the codecs did act
    routes = log_of(sim)["routes"]
    assert routes["pp"]["bytes_per_element"] == pytest.approx(0.5 + 4 / 32)  # 4-bit codes + fp32 scale per 32


def test_tahquant_on_the_pipeline_route_matches_between_simulation_and_processes(tmp_path):
    """TAH-Quant (the paper's PP codec) travels in fixed slots of its bound (docs/python.md); the
    simulated pipeline and 2 gloo processes send the same bytes and train the same bits."""
    import taco.codec as tc
    _, sim = train(tmp_path, "sim", "--pp-sim", "2", "--compress-pp", "tahquant")
    _, real = train(tmp_path, "real", "--pp", "2", "--compress-pp", "tahquant")
    assert losses(sim) == losses(real)
    assert log_of(sim)["final_params_sha256"] == log_of(real)["final_params_sha256"]
    _, plain = train(tmp_path, "plain", "--pp-sim", "2")
    assert losses(plain) != losses(sim)
    tokens = BATCH // 2 * 32  # a micro-batch's tokens (M = P = 2)
    pp = log_of(sim)["routes"]["pp"]
    assert pp["wire_bytes"] == pp["elements"] // (tokens * 64) * tc.wire_bytes("tahquant", (tokens, 64))
    assert 0.5 < pp["bytes_per_element"] < 0.6  # 80% of tokens at 4 bits, 20% at 3, fp16 zero + scale per 64


@pytest.mark.parametrize("split", [["--pp-sim", "2"], ["--dp-sim", "2"], ["--pp-sim", "2", "--micro-batches", "4"]])
def test_pp_alone_and_dp_alone_equal_the_unsplit_model(tmp_path, split):
    """Not bit for bit: the gradient is accumulated over micro-batches (fp32 sums in another
    order), the loss is the mean of micro-batch means, and the sharded AdamW sums the gradient norm
    in float64 over ranks; 3 steps stay within 1e-5 relative."""
    _, single = train(tmp_path, "single")
    _, split_run = train(tmp_path, "split", *split)
    a, b = losses(single), losses(split_run)
    assert [k[:2] for k in a] == [k[:2] for k in b]
    for (_, _, x), (_, _, y) in zip(a, b):
        assert y == pytest.approx(x, rel=1e-5)


@pytest.mark.parametrize("args, needle", [
    (["--pp-sim", "2", "--compress-pp", "bogus"], "--compress-pp: "),
    (["--pp-sim", "2", "--compress-pp", "int8-g128-asym", "--device", "cuda"], "--compress-pp int8-g128-asym has no CUDA kernels"),
    (["--dp-sim", "2", "--compress-dp", "powersgd:r4"], "--compress-dp: "),
    (["--pp-sim", "3"], "3 pipeline stages for 2 layers"),
    (["--pp-sim", "2", "--micro-batches", "1"], "--micro-batches 1 is fewer than the 2 pipeline stages"),
    (["--dp-sim", "3"], "--batch 8 does not split into 3 replicas"),
    (["--pp", "2", "--tp-sim", "2"], "are exclusive"),
    (["--compress-dp", "int4-g32"], "--compress-dp int4-g32 needs --dp"),
    (["--pp-sim", "2", "--tp-sim", "2", "--sp"], "--sp runs without pipeline"),
])
def test_bad_3d_configuration_exits_2_with_one_line(tmp_path, args, needle):
    r, out = train(tmp_path, "bad", *args, check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("taco: error:") and needle in r.stderr, r.stderr
    assert not out.exists() or not (out / "train_log.json").exists()
