"""`taco model`: bad input is one line and exit code 2; the JSON carries what the docs promise;
the predictions keep the properties the model is built on (checked on the committed records)."""
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BENCH_V62 = os.path.join(ROOT, "bench/records/2026-12-02-h200-v62-bench.json")
BENCH_V16 = os.path.join(ROOT, "bench/records/2026-12-01-h200-v16-bench.json")
RUN7 = os.path.join(ROOT, "bench/comm/2026-12-01-h200x2-run7")
LAYER = os.path.join(HERE, "fixtures/model/layer.json")
LINKS = os.path.join(ROOT, "configs/links.json")
PARTS = ["compute", "tp_comm", "codec", "pp_comm", "pp_bubble", "dp_comm", "optimizer"]


def run(taco, *args):
    return subprocess.run([str(taco), "model", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def one_error_line(r, msg):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("taco: error:"), r.stderr
    assert msg in lines[0], lines[0]


def test_help_has_examples(taco):
    r = run(taco, "--help")
    assert r.returncode == 0
    assert "Examples:" in r.stdout and "taco model --paper" in r.stdout and "--validate" in r.stdout
    for flag in ("--tp-link", "--pp-link", "--dp-link", "--codec", "--best", "--bench", "--comm",
                 "--layer", "--sp", "--links", "--subspace", "--subspace-projection-us"):
        assert flag in r.stdout


@pytest.mark.parametrize("args,msg", [
    (["--model", "gpt-9"], "--model 'gpt-9': unknown preset"),
    (["--tp", "3", "--codec", "none"], "--tp 3 must divide the heads"),
    (["--pp", "5", "--codec", "none"], "--pp 5 must divide the layers (24)"),
    (["--gbs", "100", "--codec", "none"], "--gbs 100 is not a multiple of --mbs 8 x --dp 2"),
    (["--tp-link", "warp-drive", "--codec", "none"], "--tp-link 'warp-drive': no such link tier"),
    (["--codec", "taco"], "--bench FILE"),
    (["--codec", "mxfp4", "--bench", BENCH_V62], "codec 'mxfp4' has no fused bf16"),
    (["--overlap", "sometimes", "--codec", "none"], "--overlap 'sometimes': pipeline or none"),
    (["--tp-algo", "star", "--bench", BENCH_V62], "--tp-algo: unknown algorithm \"star\""),
    (["--site-codec", "attn:fwd=taco", "--bench", BENCH_V62], "--site-codec 'attn:fwd': unknown site"),
    (["--paper", "--validate"], "--paper and --validate exclude each other"),
    (["--validate"], "--validate needs measured records"),
    (["--paper"], "--paper needs --bench FILE"),
    (["--comm", "/nonexistent.json", "--codec", "none"], "/nonexistent.json: cannot open"),
    (["--links", "/nonexistent-links.json"], "/nonexistent-links.json: cannot open"),
    (["--bench", LAYER, "--codec", "none"], "\"meta\""),
    (["--dist-opt", "maybe", "--codec", "none"], "--dist-opt 'maybe': auto, on or off"),
    (["--sp", "--tp", "1", "--codec", "none"], "--sp needs --tp > 1"),
    (["--bogus"], "--bogus"),
    (["--subspace", "1024", "--codec", "none"],
     "--subspace 1024: the subspace dimension must be 1..1023 (below the hidden size 1024 of gpt-345m"),
    (["--subspace=-3", "--codec", "none"], "--subspace -3: the subspace dimension must be 1..1023"),
    (["--subspace", "64", "--sp", "--codec", "none"],
     "subspace confinement runs without sequence parallelism"),
    (["--subspace", "64", "--subspace-projection-us=-1", "--codec", "none"],
     "--subspace-projection-us -1: must be a time >= 0"),
    (["--subspace-projection-us", "5", "--codec", "none"], "--subspace-projection-us needs --subspace K"),
    (["--validate", "--subspace", "64"], "--subspace applies to predictions"),
    (["--paper", "--subspace", "1500", "--bench", BENCH_V62],
     "--subspace 1500: the subspace dimension must be 1..1023 (below the hidden size 1024 of gpt-345m"),
])
def test_bad_input_is_one_line_and_exit_2(taco, args, msg):
    one_error_line(run(taco, *args), msg)


def test_malformed_layer_json_names_the_row(taco, tmp_path):
    with open(LAYER) as f:
        doc = json.load(f)
    doc["rows"][2]["step_ms"]["p90"] = 0.5   # below its median
    p = tmp_path / "layer.json"
    p.write_text(json.dumps(doc))
    one_error_line(run(taco, "--layer", p, "--codec", "none"),
                   f"{p}: rows[2].step_ms: expected p10 <= median <= p90")
    p.write_text(json.dumps(dict(doc, schema="taco.layer/0")))
    one_error_line(run(taco, "--layer", p, "--codec", "none"), "is not \"taco.layer/1\"")


def test_bad_links_file_is_one_line(taco, tmp_path):
    with open(LINKS) as f:
        links = json.load(f)
    links["tiers"]["ib-100"]["latency_us"] = -1
    p = tmp_path / "links.json"
    p.write_text(json.dumps(links))
    one_error_line(run(taco, "--links", p, "--codec", "none"), "tiers.ib-100.latency_us: must be >= 0")


def test_prediction_json_fields_and_breakdown(taco, tmp_path):
    out = tmp_path / "m.json"
    r = run(taco, "--model", "gpt-345m", "--tp-link", "nvlink-h200", "--pp-link", "ib-200",
            "--bench", BENCH_V62, "-J", out)
    assert r.returncode == 0, r.stderr
    assert "placeholder" in r.stdout and "speed-up" in r.stdout
    j = json.loads(out.read_text())
    assert j["schema"] == "taco.model/1"
    assert j["meta"]["mode"] == "predict" and j["meta"]["bench"] == BENCH_V62
    (p,) = j["predictions"]
    assert p["model"]["layers"] == 24 and p["parallel"] == {
        "tp": 2, "pp": 2, "dp": 2, "sp": False, "dist_opt": True, "dp_overlap": True,
        "grad_bytes": 4.0}
    assert p["links"]["tp"]["name"] == "nvlink-h200" and p["links"]["pp"]["name"] == "ib-200"
    assert p["compute_measured"] is False and p["compute_source"].startswith("placeholder")
    for name in ("plain", "compressed"):
        res = p["results"][name]
        assert sum(res["parts_ms"][k] for k in PARTS) == pytest.approx(res["step_ms"], rel=1e-9)
        assert res["tokens_per_s"] == pytest.approx(256 * 2048 / (res["step_ms"] / 1e3), rel=1e-9)
        assert res["dominant"] in PARTS and res["microbatches"] == 16
    assert p["speedup"]["compressed"] == pytest.approx(
        p["results"]["plain"]["step_ms"] / p["results"]["compressed"]["step_ms"], rel=1e-12)
    sites = {s["site"] + ":" + s["direction"]: s for s in p["results"]["compressed"]["tp_sites"]}
    assert {"attn_out:fwd", "mlp_out:fwd", "attn_qkv:bwd", "mlp_fc1:bwd"} <= set(sites)
    assert sites["attn_out:fwd"]["bytes"] == 8 * 2048 * 1024 * 2          # [b, s, h] bf16
    assert sites["attn_out:fwd"]["cost"]["wire_bytes"] == pytest.approx(8 * 2048 * 1024 * 1.0625)
    assert p["codecs"]["tp:attn_out:fwd"] == "taco" and p["codecs"]["dp"] == "none"


def test_sequence_parallel_uses_gather_scatter_pairs(taco, tmp_path):
    out = tmp_path / "sp.json"
    r = run(taco, "--model", "qwen2.5-3b", "--sp", "--bench", BENCH_V62, "-J", out, "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    sites = json.loads(out.read_text())["predictions"][0]["results"]["compressed"]["tp_sites"]
    per_layer = [s for s in sites if s["site"] not in ("embed", "head")]
    assert sorted(s["collective"] for s in per_layer) == ["all_gather"] * 4 + ["reduce_scatter"] * 4
    full = 8 * 2048 * 2048 * 2
    for s in per_layer:
        assert s["bytes"] == (full // 2 if s["collective"] == "all_gather" else full)


def test_layer_record_replaces_the_placeholder(taco, tmp_path):
    out = tmp_path / "l.json"
    r = run(taco, "--layer", LAYER, "--bench", BENCH_V62, "-J", out)
    assert r.returncode == 0, r.stderr
    p = json.loads(out.read_text())["predictions"][0]
    assert p["compute_measured"] is True and "rows[0]" in p["compute_source"]
    assert p["results"]["plain"]["layer_compute_ms"] == pytest.approx(2.0)
    assert "PLACEHOLDER" not in r.stdout


def test_paper_predictions(taco, tmp_path):
    out = tmp_path / "paper.json"
    r = run(taco, "--paper", "--bench", BENCH_V62, "-J", out)
    assert r.returncode == 0, r.stderr
    j = json.loads(out.read_text())
    preds = {p["label"]: p for p in j["predictions"]}
    assert len(preds) == 20
    for label, p in preds.items():
        sp = p["speedup"]
        assert set(sp) == {"plain", "taco_tp", "taco_3d", "best", "bound"}
        # The fastest per site includes plain, so it never loses; no codec beats a free one at
        # the fewest bytes.
        assert sp["best"] >= 1 - 1e-12, label
        assert sp["best"] <= sp["bound"] * (1 + 1e-9), label
        assert p["parallel"]["tp"] == 2 and p["parallel"]["pp"] == 2 and p["parallel"]["dp"] == 2
    # On NVLink the compressed 32 MiB all-reduce is slower than NCCL's (run7: 0.65x), so taco on
    # TP loses; with TP across 100 Gb/s links it pays, and more than over 400 Gb/s.
    assert preds["gpt-345m nvlink"]["speedup"]["taco_tp"] < 1
    assert preds["gpt-345m ib-100"]["speedup"]["taco_tp"] > preds["gpt-345m ib-400"]["speedup"]["taco_tp"] > 1
    assert preds["gpt-345m nvlink"]["links"]["tp"]["basis"] == "measured"


def test_validate_against_run7(taco, tmp_path):
    out = tmp_path / "v.json"
    comm = ",".join(os.path.join(RUN7, f) for f in ("nvlink.json", "shm.json", "socket.json"))
    r = run(taco, "--validate", "--bench", BENCH_V16, "--comm", comm, "-J", out)
    assert r.returncode == 0, r.stderr
    assert "summary" in r.stdout
    v = json.loads(out.read_text())["validation"]
    assert {f["transport"] for f in v["fits"]} == {"nvlink", "shm", "socket"}
    rows = v["rows"]
    assert len(rows) == 2 * (11 + 6 + 6)          # plain + compressed at every size
    for row in rows:
        assert row["err"] == pytest.approx(row["predicted_us"] / row["measured_us"] - 1)
        if row["kind"] == "comm-plain" and row["transport"] != "socket":
            assert abs(row["err"]) < 0.10
    kinds = {(s["kind"], s["transport"]) for s in v["summary"]}
    assert ("comm-compressed", "nvlink") in kinds and ("part: wire", "shm") in kinds
    assert 0 < v["executor"]["overlap_efficiency"] <= 1


def test_comm_records_recalibrate_the_tier_they_measure(taco, tmp_path):
    out = tmp_path / "r.json"
    r = run(taco, "--codec", "none", "--comm", os.path.join(RUN7, "shm.json"), "--tp-link", "h200-shm",
            "-J", out)
    assert r.returncode == 0, r.stderr
    assert "tier h200-shm recalibrated from --comm" in r.stdout
    j = json.loads(out.read_text())
    assert j["meta"]["recalibrated_tiers"] == ["h200-shm"]
    (line,) = j["predictions"][0]["links"]["tp"]["lines"]
    assert line["bw_GBps"] == pytest.approx(28.85, rel=0.01)     # run7's shm plateau


def test_custom_model_defaults_ffn_and_checks_the_shape(taco, tmp_path):
    out = tmp_path / "c.json"
    r = run(taco, "--model", "custom", "--layers", 8, "--hidden", 512, "--heads", 8, "--vocab", 1000,
            "--tp", 2, "--pp", 2, "--dp", 1, "--gbs", 64, "--codec", "none", "-J", out, "-q")
    assert r.returncode == 0, r.stderr
    m = json.loads(out.read_text())["predictions"][0]["model"]
    assert m["ffn"] == 2048 and m["kv_heads"] == 8 and m["arch"] == "gpt"
    one_error_line(run(taco, "--model", "custom", "--layers", 8, "--codec", "none"),
                   "--model custom needs --layers, --hidden, --heads and --vocab")


def test_subspace_scales_the_tp_messages_and_counts_the_projection(taco, tmp_path):
    out = tmp_path / "ss.json"
    r = run(taco, "--model", "gpt-345m", "--tp-link", "ib-100", "--bench", BENCH_V62,
            "--subspace", 128, "--subspace-projection-us", 20, "-J", out)
    assert r.returncode == 0, r.stderr
    assert "# subspace: k 128" in r.stdout and "20 us per confined message" in r.stdout
    (p,) = json.loads(out.read_text())["predictions"]
    ss = p["subspace"]
    assert ss["k"] == 128 and ss["hidden"] == 1024 and ss["bytes_ratio"] == 0.125
    assert ss["projection_us_per_message"] == 20 and ss["projection_counted"] is True
    assert ss["applies_to"] == ["subspace", "compressed"]
    assert set(p["results"]) == {"plain", "subspace", "compressed"}
    res = p["results"]
    full = 8 * 2048 * 1024 * 2
    dense = {s["site"] + ":" + s["direction"]: s for s in res["plain"]["tp_sites"]}
    for name in ("subspace", "compressed"):
        sites = {s["site"] + ":" + s["direction"]: s for s in res[name]["tp_sites"]}
        assert sorted(k for k, s in sites.items() if s["subspace_k"] == 128) == sorted(ss["confined_messages"])
        for key, s in sites.items():
            if s["subspace_k"]:
                assert s["bytes"] * 1024 == dense[key]["bytes"] * 128 == full * 128   # exactly K/hidden
            else:
                assert key in ("embed:fwd", "head:bwd") and s["bytes"] == dense[key]["bytes"] == full
        # PP and DP unchanged; the projection: micro-batches x layers of the stage x 4 x 20 us.
        for k in ("pp_send", "dp_grad_bucket", "dp_param_gather_bucket", "embedding_sync"):
            assert res[name][k] == res["plain"][k]
        assert res[name]["projections_per_microbatch"] == 12 * 4
        assert res[name]["projection_ms"] == pytest.approx(16 * 12 * 4 * 20e-3, rel=1e-12)
        assert sum(res[name]["parts_ms"][k] for k in PARTS) == pytest.approx(res[name]["step_ms"], rel=1e-9)
    # A plain all-reduce of the confined buffer is the plain one's at K/hidden of the bytes: the
    # subspace (plain NCCL) result's TP part moves 8x fewer bytes, so it is far smaller.
    assert res["subspace"]["parts_ms"]["tp_comm"] < res["plain"]["parts_ms"]["tp_comm"] / 4
    assert res["plain"]["projection_ms"] == 0 and res["plain"]["subspace_k"] == 0


def test_subspace_without_projection_says_it_is_not_counted(taco, tmp_path):
    out = tmp_path / "ss0.json"
    r = run(taco, "--model", "qwen2.5-3b", "--codec", "none", "--subspace", 256, "-J", out)
    assert r.returncode == 0, r.stderr
    assert "projection cost is not counted" in r.stdout and "NOT counted" in r.stdout
    (p,) = json.loads(out.read_text())["predictions"]
    assert p["subspace"]["projection_counted"] is False and "NOT counted" in p["subspace"]["note"]
    assert p["results"]["subspace"]["projection_ms"] == 0
    assert p["results"]["subspace"]["step_ms"] == p["results"]["compressed"]["step_ms"]
    assert p["results"]["subspace"]["parts_ms"]["compute"] == p["results"]["plain"]["parts_ms"]["compute"]


def test_subspace_with_best_and_paper(taco, tmp_path):
    out = tmp_path / "ssb.json"
    r = run(taco, "--best", "--tp-link", "pcie-gen5", "--bench", BENCH_V62, "--subspace", 128,
            "--subspace-projection-us", 10, "-J", out, "-q")
    assert r.returncode == 0, r.stderr
    (p,) = json.loads(out.read_text())["predictions"]
    assert p["results"]["compressed"]["subspace_k"] == 128
    # The fastest per site includes plain NCCL on the same confined buffers: never slower.
    assert p["results"]["compressed"]["step_ms"] <= p["results"]["subspace"]["step_ms"] * (1 + 1e-12)

    out = tmp_path / "ssp.json"
    r = run(taco, "--paper", "--bench", BENCH_V62, "--subspace", 128, "--subspace-projection-us", 20,
            "-J", out)
    assert r.returncode == 0, r.stderr
    assert "subsp" in r.stdout
    preds = json.loads(out.read_text())["predictions"]
    assert len(preds) == 20
    for p in preds:
        assert set(p["speedup"]) == {"plain", "subspace", "taco_tp", "taco_3d", "best", "bound"}
        assert p["subspace"]["k"] == 128 and p["subspace"]["projection_counted"] is True
        assert p["subspace"]["hidden"] == p["model"]["hidden"]
        layers = p["model"]["layers"] // 2
        for name, res in p["results"].items():
            assert res["subspace_k"] == (0 if name == "plain" else 128)
            assert res["projection_ms"] == pytest.approx(0 if name == "plain" else 16 * layers * 4 * 20e-3,
                                                         rel=1e-12)
        # The fastest per site includes plain NCCL on the confined buffers.
        assert p["speedup"]["best"] >= p["speedup"]["subspace"] * (1 - 1e-12), p["label"]


def test_a_variant_spelled_in_another_token_order_finds_its_bench_rows(taco, tmp_path):
    # taco bench names rows canonically (int4:g128:sbf16:had); the spec as a user writes it is the same codec
    bench = os.path.join(ROOT, "bench/records/2026-12-07-lowbit-1000/bench_h200/model_rows.json")
    outs = {}
    for name, spec in [("given", "int4:g128:had:sbf16"), ("canonical", "int4:g128:sbf16:had")]:
        outs[name] = tmp_path / f"{name}.json"
        r = run(taco, "--model", "gpt-345m", "--tp-link", "eth-25", "--bench", bench, "--codec", spec,
                "--site-codec", "attn_qkv:bwd=int3:g128:had:sbf16", "-J", outs[name])
        assert r.returncode == 0, r.stderr
    given, canonical = (json.loads(outs[n].read_text())["predictions"][0] for n in ("given", "canonical"))
    assert given["results"] == canonical["results"]
    assert given["codecs"]["tp:attn_out:fwd"] == "int4:g128:sbf16:had"
    assert given["codecs"]["tp:attn_qkv:bwd"] == "int3:g128:sbf16:had"
    # a name that is not a codec spec still gets the table's list
    one_error_line(run(taco, "--bench", bench, "--codec", "int9:bogus"), "has no fused bf16 encode")


def test_pieces_below_the_smallest_measured_size_are_named(taco):
    # the model charges a piece below the smallest measured size that size's time: it says so
    rows = os.path.join(ROOT, "bench/records/2026-12-07-lowbit-1000/bench_h200/model_rows.json")  # from 16 MiB
    big = os.path.join(ROOT, "bench/records/2026-12-07-h100-42-ab/bench_new_1.json")  # from 64 MiB
    common = ["--tp-link", "pcie-gen5", "--codec", "nvfp4", "--layer", LAYER]
    r = run(taco, "--model", "gpt-345m", "--bench", big, *common)  # 32 MiB messages in 4 pieces
    assert r.returncode == 0, r.stderr
    assert "# note: nvfp4's encode rows start at 64 MiB of input; pieces of 8 MiB (attn_out:fwd)" in r.stdout
    r = run(taco, "--model", "qwen2.5-3b", "--bench", rows, *common)  # 64 MiB messages: 16 MiB pieces
    assert r.returncode == 0, r.stderr
    assert "encode rows start at" not in r.stdout
