"""python -m taco.train on the CPU: compression fires at every TP site in both directions, the
lossless bf16 codec reproduces the uncompressed run bit for bit, simulated TP equals real gloo TP,
captures hold every rank, and bad configurations end with one line and exit code 2."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

TINY = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--batch", "4",
        "--steps", "6", "--eval-every", "3", "--eval-batches", "2", "--log-every", "1", "--data", str(REPO / "python"),
        "--data-bytes", "200000", "--threads", "1", "--device", "cpu"]


def train(tmp_path, name, *args, check=True):
    out = tmp_path / name
    env = dict(os.environ)  # the interpreter's own taco (make test: the installed package)
    r = subprocess.run([sys.executable, "-m", "taco.train", *TINY, *args, "--out", str(out)], capture_output=True,
                       text=True, env=env, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r, out


def metrics(out, kind):
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in recs if r["type"] == kind]


def losses(out):
    return [(r["step"], r["loss"]) for r in metrics(out, "step")] + [(r["step"], r["val_loss"]) for r in metrics(out, "val")]


@pytest.mark.parametrize("arch, sp", [("llama", False), ("gpt2", True)])
def test_compression_fires_at_every_site_and_direction(tmp_path, arch, sp):
    extra = ["--sp"] if sp else []
    if arch == "gpt2":
        extra += ["--kv-heads", "4"]
    _, out = train(tmp_path, "run", "--arch", arch, "--tp-sim", "2", "--compress", "taco", "--sample-every", "2", *extra)
    log = json.loads((out / "train_log.json").read_text())
    fired = {(f["site"], f["direction"], f["collective"]): f["calls"] for f in log["fired"]}
    if sp:
        want = {(s, "fwd", "all_gather") for s in ("attn_qkv", "mlp_fc1")} | \
               {(s, "bwd", "reduce_scatter") for s in ("attn_qkv", "mlp_fc1")} | \
               {(s, "fwd", "reduce_scatter") for s in ("attn_out", "mlp_out")} | \
               {(s, "bwd", "all_gather") for s in ("attn_out", "mlp_out")}
    else:
        want = {("attn_qkv", "bwd", "all_reduce"), ("mlp_fc1", "bwd", "all_reduce"),
                ("attn_out", "fwd", "all_reduce"), ("mlp_out", "fwd", "all_reduce")}
    assert set(fired) == want
    assert all(calls == 6 * 2 for calls in fired.values())  # steps x layers; validation is not compressed
    for t in log["traffic"]:
        assert abs(t["bytes_per_element"] - 1.0625) < 0.02, t  # taco's wire: 1 + 8/128 bytes per element
    assert all(r["loss"] == r["loss"] and r["loss"] < 6 for r in metrics(out, "step"))  # finite
    errs = metrics(out, "error")
    assert errs and all(0 < e["rel_l2"] < 0.1 for e in errs)
    assert {e["step"] for e in errs} == {0, 2, 4}


def test_lossless_bf16_codec_reproduces_the_uncompressed_run_bit_for_bit(tmp_path):
    args = ["--tp-sim", "2", "--dtype", "bfloat16"]
    _, plain = train(tmp_path, "none", *args, "--compress", "none")
    _, lossless = train(tmp_path, "bf16", *args, "--compress", "bf16")
    _, lossy = train(tmp_path, "fp8", *args, "--compress", "fp8-g128")
    assert losses(plain) == losses(lossless)
    assert losses(plain) != losses(lossy)


def test_simulated_tp_equals_real_gloo_tp(tmp_path):
    _, sim = train(tmp_path, "sim", "--tp-sim", "2", "--compress", "taco", "--algo", "two_shot")
    _, real = train(tmp_path, "real", "--tp", "2", "--compress", "taco", "--algo", "two_shot")
    assert losses(sim) == losses(real)
    log = json.loads((real / "train_log.json").read_text())
    assert log["mode"] == "dist" and log["tp"] == 2


def test_subspace_training_sends_k_coordinates_and_bf16_on_them_is_lossless(tmp_path):
    args = ["--tp-sim", "2", "--dtype", "bfloat16", "--subspace", "16"]
    _, plain = train(tmp_path, "none", *args, "--compress", "none")
    _, lossless = train(tmp_path, "bf16", *args, "--compress", "bf16")
    _, lossy = train(tmp_path, "int8", *args, "--compress", "int8-g128-had")
    assert losses(plain) == losses(lossless)
    assert losses(plain) != losses(lossy)
    log = json.loads((plain / "train_log.json").read_text())
    assert log["variant"] == "none@subspace=16" and log["config"]["subspace"] == 16
    fired = {(f["site"], f["direction"], f["collective"]): f["calls"] for f in log["fired"]}
    assert fired == {("attn_qkv", "bwd", "all_reduce"): 12, ("mlp_fc1", "bwd", "all_reduce"): 12,
                     ("attn_out", "fwd", "all_reduce"): 12, ("mlp_out", "fwd", "all_reduce"): 12}
    tokens = 4 * 32  # batch x seq
    for t in log["traffic"]:  # 6 steps x 2 layers of K = 16 coordinates per token, standing for 64
        assert t["wire_elements"] == 6 * 2 * tokens * 16 and t["elements"] == 6 * 2 * tokens * 64, t
        assert t["bytes_per_element"] == 2 * 16 / 64, t
    for t in json.loads((lossy / "train_log.json").read_text())["traffic"]:
        assert t["bytes_per_element"] == pytest.approx((1 + 4 / 128) * 16 / 64), t  # int8 + fp32 scale per 128


def test_subspace_simulated_tp_equals_real_gloo_tp(tmp_path):
    """Processes all-reduce the norms' partial gradients; simulated ranks share the parameter."""
    args = ["--subspace", "16", "--compress", "taco", "--algo", "two_shot"]
    _, sim = train(tmp_path, "sim", "--tp-sim", "2", *args)
    _, real = train(tmp_path, "real", "--tp", "2", *args)
    assert losses(sim) == losses(real)
    _, full = train(tmp_path, "full", "--tp-sim", "2", "--compress", "taco", "--algo", "two_shot")
    assert losses(full) != losses(sim)


def test_capture_writes_every_rank_of_every_collective(tmp_path):
    h5py = pytest.importorskip("h5py")
    _, out = train(tmp_path, "cap", "--tp-sim", "2", "--compress", "fp8-g128", "--capture-steps", "1")
    with h5py.File(out / "trace.step000001.h5", "r") as f:
        names = sorted(f["tensors"][k].attrs["name"] for k in f["tensors"])
    assert len(names) == 2 * 4 * 2  # layers x sites x ranks
    assert "s1.l0.attn_out.fwd.all_reduce.r1" in names


@pytest.mark.parametrize("args, needle", [
    (["--compress", "tacco"], "variant 'tacco'"),
    (["--config", "SEL"], "unknown TP site 'attn_proj'"),
    (["--algo", "tree"], "unknown all-reduce algorithm 'tree'"),
    (["--tp-sim", "3"], "does not split over TP=3"),
    (["--tp", "2", "--tp-sim", "2"], "exclusive"),
    (["--sp"], "--sp needs"),
    (["--subspace", "0"], "--subspace: subspace dimension 0 must be between 1 and 63"),
    (["--subspace", "64"], "must be between 1 and 63"),
    (["--subspace", "12"], "must be a multiple of 8"),
    (["--subspace", "16", "--sp", "--tp-sim", "2"], "--subspace runs without --sp"),
])
def test_bad_configuration_exits_2_with_one_line(tmp_path, args, needle):
    sel = tmp_path / "sel.json"
    sel.write_text(json.dumps({"choices": [{"site": "attn_proj", "direction": "fwd", "variant": "taco"}]}))
    args = [str(sel) if a == "SEL" else a for a in args]
    r, out = train(tmp_path, "bad", *args, check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("taco: error:") and needle in r.stderr, r.stderr
    assert not (out / "train_log.json").exists()


def test_sweep_pairs_runs_by_seed_and_summarizes(tmp_path):
    env = dict(os.environ)
    out = tmp_path / "sweep"
    trainer = [a for a in TINY if a not in ("--steps", "6")] + ["--steps", "4", "--tp-sim", "2", "--sample-every", "2"]
    r = subprocess.run([sys.executable, "-m", "taco.train.sweep", "--out", str(out), "--variants",
                        "none,int4-g32,ef:int4-g32", "--seeds", "1,2", "--baseline-seeds", "1,2", "--parallel", "2",
                        "--", *trainer], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((out / "training_summary.json").read_text())
    assert s["schema"] == "taco.training_summary/1" and s["baseline_seeds"] == [1, 2]
    rows = {t["variant"]: t for t in s["table"]}
    base = dict(zip(rows["none"]["seeds"], rows["none"]["final_val_loss"]))
    for v in ("int4-g32", "ef:int4-g32"):
        t = rows[v]
        want = [(x - base[sd]) / base[sd] * 100 for sd, x in zip(t["seeds"], t["final_val_loss"])]
        assert t["paired_diff_pct"] == pytest.approx(want)
        assert t["bytes_per_element"] == pytest.approx(0.625)  # 4-bit codes + an fp32 scale per 32
    # error feedback changes what the run sees: its losses differ from the plain codec's
    assert rows["int4-g32"]["final_val_loss"] != rows["ef:int4-g32"]["final_val_loss"]
    assert "band" in r.stdout and "int4-g32" in r.stdout


def test_sweep_runs_subspace_candidates_and_the_null_pair(tmp_path):
    out = tmp_path / "sweep"
    trainer = [a for a in TINY if a not in ("--steps", "6")] + ["--steps", "4", "--tp-sim", "2"]
    r = subprocess.run([sys.executable, "-m", "taco.train.sweep", "--out", str(out), "--variants",
                        "none,none@subspace=16", "--seeds", "1,2", "--baseline-seeds", "1,2", "--null-pair",
                        "--parallel", "2", "--", *trainer], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "none@subspace-16" / "seed2" / "train_log.json").exists()
    assert (out / "none" / "seed1-repeat" / "train_log.json").exists()
    s = json.loads((out / "training_summary.json").read_text())
    assert s["baseline_seeds"] == [1, 2]
    assert s["null_pair"] == {"seed": 1, "diff_pct": 0.0}  # the CPU runs the same configuration twice alike
    rows = {t["variant"]: t for t in s["table"]}
    t = rows["none@subspace=16"]
    assert t["bytes_per_element"] == 4 * 16 / 64  # float32 on the CPU, 16 of 64 columns
    d = t["paired_diff_pct"]
    assert t["std_diff_pct"] == pytest.approx(abs(d[0] - d[1]) / 2 ** 0.5)
    assert len(t["reach_step"]) == 2 and not t["meets_goal"]  # two seeds cannot meet a 3-seed goal
    runs = {(r["variant"], r["seed"], r["repeat"]): r for r in s["runs"]}
    for seed, eq in zip(t["seeds"], t["baseline_equivalent_step"]):  # where the baseline got that low
        base_curve = runs[("none", seed, False)]["val_curve"]
        final = runs[("none@subspace=16", seed, False)]["final_val_loss"]
        hit = [i for i, (_, _, v) in enumerate(base_curve) if v <= final]
        if not hit:
            assert eq is None
        elif hit[0] == 0:
            assert eq == base_curve[0][0]
        else:
            (s0, _, v0), (s1, _, v1) = base_curve[hit[0] - 1], base_curve[hit[0]]
            assert eq == pytest.approx(s0 + (s1 - s0) * (v0 - final) / (v0 - v1))
    assert "null pair (baseline seed 1 twice): +0.000%" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "taco.train.sweep", "--out", str(tmp_path / "b"), "--variants",
                          "none@rank=4", "--", *trainer], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown option 'rank=4'" in bad.stderr and bad.stderr.count("\n") == 1
    assert not (tmp_path / "b").exists()


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device (GPU machine only)")
@pytest.mark.parametrize("variant", ["taco", "int4-g32-had", "nvfp4", "ef:int4-g32"])
def test_cuda_training_compresses_every_site(tmp_path, variant):
    args = [a if a != "cpu" else "cuda" for a in TINY]
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "taco.train", *args, "--tp-sim", "2", "--compress", variant,
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    log = json.loads((out / "train_log.json").read_text())
    assert len(log["fired"]) == 4 and all(f["calls"] == 6 * 2 for f in log["fired"])
    assert all(0 < r["loss"] < 6 for r in metrics(out, "step"))


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device (GPU machine only)")
@pytest.mark.parametrize("variant", ["none", "bf16", "int8-g128-had"])
def test_cuda_subspace_training_sends_k_coordinates(tmp_path, variant):
    args = [a if a != "cpu" else "cuda" for a in TINY]
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "taco.train", *args, "--tp-sim", "2", "--subspace", "16",
                        "--compress", variant, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    log = json.loads((out / "train_log.json").read_text())
    assert len(log["fired"]) == 4 and all(f["calls"] == 6 * 2 for f in log["fired"])
    assert all(t["wire_elements"] * 64 == t["elements"] * 16 for t in log["traffic"])
    assert all(0 < r["loss"] < 6 for r in metrics(out, "step"))


def test_sweep_summarizes_unfinished_runs_at_a_step_and_says_which(tmp_path):
    """Runs cut off before their end (no train_log.json): --summarize names the last validation
    step every run reached, and --at-step sizes a subspace's wire from the run's command."""
    out = tmp_path / "cut"
    losses = {("none", 1): [3.0, 2.0, 1.5], ("none@subspace=16", 1): [3.0, 2.2, 1.8]}
    for (variant, seed), vals in losses.items():
        d = out / variant.replace("=", "-") / f"seed{seed}"
        d.mkdir(parents=True)
        cmd = ["python3", "-m", "taco.train", "--hidden", "64", "--seed", str(seed)]
        (d / "run.json").write_text(json.dumps({"variant": variant, "seed": seed, "repeat": False, "command": cmd}))
        recs = [{"type": "step", "step": s, "tokens": (s + 1) * 8, "loss": 9.0} for s in (0, 10, 20)]
        recs += [{"type": "val", "step": s, "val_loss": v} for s, v in zip((0, 10, 20), vals)]
        if variant == "none":  # the subspace run got one validation fewer
            recs.append({"type": "val", "step": 30, "val_loss": 1.4})
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = subprocess.run([sys.executable, "-m", "taco.train.sweep", "--summarize", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "no finished runs" in r.stderr and "try --at-step 20" in r.stderr
    assert not (out / "training_summary.json").exists()
    r = subprocess.run([sys.executable, "-m", "taco.train.sweep", "--summarize", str(out), "--at-step", "20"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = {t["variant"]: t for t in json.loads((out / "training_summary.json").read_text())["table"]}
    assert rows["none@subspace=16"]["bytes_per_element"] == 2.0 * 16 / 64  # bf16 on 16 of 64 columns
    assert rows["none@subspace=16"]["paired_diff_pct"] == pytest.approx([(1.8 - 1.5) / 1.5 * 100])


def test_sweep_candidates_name_the_backward_codec_as_the_trainer_does():
    from taco.train import sweep
    assert sweep.candidate_args("powersgd:r8@bwd=int2-g128-had@subspace=96") == [
        "--compress", "powersgd:r8", "--compress-bwd", "int2-g128-had", "--subspace", "96"]
    with pytest.raises(Exception, match="unknown option 'fwd=x'"):
        sweep.candidate_args("none@fwd=x")


def test_sweep_config_candidate_runs_the_selection_per_site_and_direction(tmp_path):
    # config:PATH runs `--config PATH` under its own name; a selection that gives every site of a
    # direction one codec is the same run as VARIANT@bwd=V2, loss for loss and byte for byte.
    from taco.train import cli, sweep
    sel = tmp_path / "sel.json"
    sel.write_text(json.dumps({"choices": [{"site": s, "direction": d, "variant": v} for s, d, v in [
        ("attn_out", "fwd", "int4-g32"), ("mlp_out", "fwd", "int4-g32"),
        ("attn_qkv", "bwd", "int8-g128"), ("mlp_fc1", "bwd", "int8-g128")]]}))
    cand = f"config:{sel}@bwd=int3-g32"
    assert sweep.candidate_args(cand) == ["--config", str(sel), "--compress-bwd", "int3-g32"]
    assert cli.run_name(cli.parse_args(["--out", "o", *sweep.candidate_args(cand)])) == cand
    with pytest.raises(Exception, match="config: needs a selection.json path"):
        sweep.candidate_args("config:@bwd=int3-g32")
    out = tmp_path / "sweep"
    trainer = [a for a in TINY if a not in ("--steps", "6")] + ["--steps", "4", "--tp-sim", "2"]
    r = subprocess.run([sys.executable, "-m", "taco.train.sweep", "--out", str(out), "--variants",
                        f"none,config:{sel},int4-g32@bwd=int8-g128", "--seeds", "1", "--baseline-seeds", "1",
                        "--parallel", "2", "--", *trainer], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {t["variant"]: t for t in json.loads((out / "training_summary.json").read_text())["table"]}
    mix, flags = rows[f"config:{sel}"], rows["int4-g32@bwd=int8-g128"]
    assert mix["final_val_loss"] == flags["final_val_loss"] != rows["none"]["final_val_loss"]
    assert mix["bytes_per_element"] == flags["bytes_per_element"] == pytest.approx((0.625 + 1.03125) / 2)


@pytest.mark.parametrize("candidate", ["taco@pp=int4-g32-had@dp=ef:int4-g32-had@dpw=int8-g128",
                                       "none@dp=int8-g128", "int4-g32-had@bwd=int8-g128@pp=fp8-g128"])
def test_sweep_3d_candidates_are_the_trainers_run_names(candidate):
    # A 3D candidate's flags, parsed by the trainer, name the run exactly as the candidate, so the
    # summary pairs each run with its candidate; the routes need their -sim layouts.
    from taco.train import cli, sweep
    args = sweep.candidate_args(candidate)
    a = cli.parse_args(["--tp-sim", "2", "--pp-sim", "2", "--dp-sim", "2", "--layers", "2", "--batch", "8", "--out", "o",
                        *args])
    assert cli.run_name(a) == candidate
    assert args[:2] == ["--compress", candidate.split("@")[0]]
